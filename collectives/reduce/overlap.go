package reduce

import "unsafe"

// Sharing is how two buffers share memory (see Overlap).
type Sharing uint8

const (
	// Disjoint buffers share no byte (an empty buffer shares none).
	Disjoint Sharing = iota
	// Identical buffers are the same memory: same start and length.
	Identical
	// Partial is any other sharing of at least one byte.
	Partial
)

// Overlap reports how a and b share memory: the check Into and Many make on
// their buffers (a destination may be a source only when Identical), and
// that callers make on theirs.
func Overlap(a, b []byte) Sharing {
	if len(a) == 0 || len(b) == 0 {
		return Disjoint
	}
	pa := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	pb := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if pa+uintptr(len(a)) <= pb || pb+uintptr(len(b)) <= pa {
		return Disjoint
	}
	if pa == pb && len(a) == len(b) {
		return Identical
	}
	return Partial
}
