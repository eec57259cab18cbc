package fence

import (
	"errors"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// Sentinel errors of the fence layer.
var (
	// ErrReleased: the fence was released before the operation could complete.
	// A release by failure wraps its cause as well.
	ErrReleased = errors.New("fence released")
	// ErrTimeout: a wait or the fence's deadline ran out.
	ErrTimeout = errs.ErrTimeout
	// ErrDropped: the handle was garbage-collected without Release.
	ErrDropped = errors.New("fence handle dropped without Release")
	// ErrClosed: the fence manager (the runtime) is closed.
	ErrClosed = errs.ErrClosed
	// ErrCrossStream: UpdateGPU's input is produced on another stream and is
	// not yet complete.
	ErrCrossStream = errors.New("input produced on another stream")
)
