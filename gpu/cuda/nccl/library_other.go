//go:build !linux

package nccl

import (
	"runtime"
	"strings"
)

// openLibrary fails: this package drives NCCL on Linux only.
func openLibrary(paths []string) (*library, error) {
	return nil, unavailablef("not supported on %s (would have tried %s)", runtime.GOOS, strings.Join(paths, ", "))
}

// threadID is 0: no group is ever opened here (openLibrary fails).
func threadID() int { return 0 }
