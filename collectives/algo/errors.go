package algo

import (
	"github.com/choreo-gpu/choreo/internal/errs"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Sentinel errors. Errors from this package are wrapped with their origin
// ("algo: allreduce rank 2: ...") and test with errors.Is.
var (
	// ErrMismatch: the ranks called different collectives at the same
	// sequence number (kind, op, root, algorithm options differ).
	ErrMismatch = errs.ErrMismatch
	// ErrShapeMismatch: the ranks disagree on count or dtype. Errors
	// wrapping it also wrap ErrMismatch.
	ErrShapeMismatch = errs.ErrShapeMismatch
	// ErrBadArgument: a descriptor or buffer the caller gave is invalid
	// (dtype, count, buffer length, root or peer out of range, kind).
	ErrBadArgument = errs.ErrBadArgument
	// ErrBadOp is reduce.ErrBadOp: an unknown reduce op.
	ErrBadOp = reduce.ErrBadOp
	// ErrBadPeer is transport.ErrBadPeer: a point-to-point peer out of
	// range or equal to the caller (always so in a group of size 1).
	ErrBadPeer = transport.ErrBadPeer
)
