package gpu

import (
	"errors"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// Sentinel errors of the device layer; backends wrap them with their origin
// ("sim: fill: ...") so callers test them with errors.Is.
var (
	// ErrNoBackend: the named backend is not registered or cannot run on this machine.
	ErrNoBackend = errors.New("backend not available")
	// ErrClosed: the device, queue or buffer was closed or freed.
	ErrClosed = errs.ErrClosed
	// ErrBadArgument: a command or call had a bad argument (nil buffer, out of
	// range, wrong dtype, size mismatch).
	ErrBadArgument = errs.ErrBadArgument
	// ErrCanceled: a CPU-side wait was called off through its cancel channel.
	ErrCanceled = errors.New("wait canceled")
	// ErrOutOfMemory: an allocation could not be satisfied.
	ErrOutOfMemory = errors.New("out of memory")
)
