package array

import "errors"

// Sentinel errors of the array layer.
var (
	// ErrShape: a shape is invalid or shapes do not match for an op.
	ErrShape = errors.New("shape mismatch")
	// ErrDType: dtypes do not match for an op, or the Go type does not match.
	ErrDType = errors.New("dtype mismatch")
	// ErrFailed: the array's producer failed; the cause is wrapped as well.
	ErrFailed = errors.New("array failed")
)
