//go:build !linux

package sim

// hostAvailable reports nothing off Linux: the sim falls back to
// DefaultMemoryBytes.
func hostAvailable() (uint64, bool) { return 0, false }
