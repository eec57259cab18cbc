package reduce

import (
	"errors"
	"fmt"

	"github.com/choreo-gpu/choreo/internal/errs"

	"github.com/choreo-gpu/choreo/gpu"
)

// Sentinel errors; every error this package returns wraps one of them and
// can be tested with errors.Is.
var (
	// ErrBadOp: the reduce op is not one of Sum, Prod, Min, Max.
	ErrBadOp = errors.New("bad op")
	// ErrBadArgument: invalid dtype, buffer lengths that differ or are not a
	// multiple of the element size, no sources, or overlapping buffers.
	ErrBadArgument = errs.ErrBadArgument
)

// badArg returns "reduce: <op> <dtype>: <msg>: bad argument".
func badArg(op Op, dt gpu.DType, format string, args ...any) error {
	return fmt.Errorf("reduce: %s %s: %s: %w", op, dt, fmt.Sprintf(format, args...), ErrBadArgument)
}

// checkOpType validates op and dt, the checks shared by Into and Many.
func checkOpType(op Op, dt gpu.DType) error {
	if !op.Valid() {
		return fmt.Errorf("reduce: %s %s: unknown op: %w", op, dt, ErrBadOp)
	}
	if !dt.Valid() {
		return badArg(op, dt, "invalid dtype")
	}
	return nil
}
