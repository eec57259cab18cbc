package array

import (
	"errors"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// Sentinel errors of the array layer.
var (
	// ErrShape: a shape is invalid or shapes do not match for an op.
	ErrShape = errors.New("shape mismatch")
	// ErrDType: dtypes do not match for an op, or the Go type does not match.
	ErrDType = errors.New("dtype mismatch")
	// ErrFailed: the array's producer failed; the cause is wrapped as well.
	ErrFailed = errors.New("array failed")
	// ErrTooLarge: a shape has more elements than an array may hold.
	ErrTooLarge = errs.ErrTooLarge
	// ErrFreed: the array's memory was freed (Array.Free) before this use.
	ErrFreed = errors.New("array freed")
)
