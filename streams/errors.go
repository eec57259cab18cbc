package streams

import (
	"errors"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// Sentinel errors of the stream actors.
var (
	// ErrClosed: the stream (or its runtime) is closed.
	ErrClosed = errs.ErrClosed
	// ErrPanic: a task or actor panicked; the panic value is in the message.
	ErrPanic = errors.New("panic")
)
