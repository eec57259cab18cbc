//go:build linux

package cuda

import (
	"fmt"

	"github.com/choreo-gpu/choreo/gpu"
)

// Error is a failed driver call: the entry point, the CUresult and the
// driver's name and description of it. It prints as
// "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"; the
// backend wraps it with its origin ("cuda: alloc 64 bytes: ..."). An
// out-of-memory result unwraps to gpu.ErrOutOfMemory.
type Error struct {
	Call string // driver entry point, e.g. "cuMemAlloc_v2"
	Code int    // CUresult
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Desc string // the driver's description
}

func (e *Error) Error() string {
	if e.Desc == "" {
		return fmt.Sprintf("%s: %s (%d)", e.Call, e.Name, e.Code)
	}
	return fmt.Sprintf("%s: %s (%d): %s", e.Call, e.Name, e.Code, e.Desc)
}

// Unwrap maps driver results onto the gpu sentinels where one fits.
func (e *Error) Unwrap() error {
	if cuResult(e.Code) == cudaOutOfMemory {
		return gpu.ErrOutOfMemory
	}
	return nil
}

// unavailablef builds an error that wraps ErrUnavailable and
// gpu.ErrNoBackend, for a machine without a usable driver or device.
func unavailablef(format string, args ...any) error {
	return fmt.Errorf(format+": %w (%w)", append(args, ErrUnavailable, gpu.ErrNoBackend)...)
}

// closedf builds an error that wraps gpu.ErrClosed.
func closedf(format string, args ...any) error {
	return fmt.Errorf("cuda: "+format+": %w", append(args, gpu.ErrClosed)...)
}

// badArgf builds an error that wraps gpu.ErrBadArgument.
func badArgf(format string, args ...any) error {
	return fmt.Errorf("cuda: "+format+": %w", append(args, gpu.ErrBadArgument)...)
}

// streamFailed wraps a stream failure with the backend's origin.
func streamFailed(err error) error {
	return fmt.Errorf("cuda: stream failed: %w", err)
}
