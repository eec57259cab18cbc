// Package errs holds the one set of sentinel errors of the whole module.
// Every layer re-exports the ones its callers test (gpu.ErrClosed,
// collectives.ErrTimeout, ...: the same values), wraps them with its
// context once ("collectives: allreduce g1 r0 s3: ..."), and never makes a
// second sentinel for the same meaning, so errors.Is against a public
// sentinel holds whichever layer the failure came from.
//
// It imports nothing of choreo: every package may import it.
package errs

import "errors"

var (
	// ErrClosed: the thing called (runtime, stream, queue, buffer, fence
	// manager, group, transport endpoint) is closed or freed.
	ErrClosed = errors.New("closed")
	// ErrTimeout: a deadline passed (errors from a context's deadline also
	// wrap context.DeadlineExceeded).
	ErrTimeout = errors.New("timeout")
	// ErrPeerLost: a peer rank closed, died or became unreachable.
	ErrPeerLost = errors.New("peer lost")
	// ErrAborted: another rank (or this one) aborted the collective; the
	// cause is wrapped as well.
	ErrAborted = errors.New("aborted")
	// ErrBadArgument: a call had an invalid argument.
	ErrBadArgument = errors.New("bad argument")
	// ErrMismatch: ranks disagree on a collective (kind, op, root,
	// algorithm, shape or dtype).
	ErrMismatch = errors.New("mismatch across ranks")
	// ErrShapeMismatch: ranks disagree on shape or dtype; errors wrapping
	// it also wrap ErrMismatch.
	ErrShapeMismatch = errors.New("shape mismatch across ranks")
	// ErrTooLarge: a size over a limit (a payload over the group's limit,
	// an array with more elements than allowed).
	ErrTooLarge = errors.New("too large")
	// ErrEvicted: this rank was dropped from its group (it was silent
	// past the peer timeout, the survivors agreed on a group without it,
	// or its control plane failed); it must not write into the group's
	// later epochs.
	ErrEvicted = errors.New("evicted from the group")
	// ErrStale: a message or call of a group's retired epoch (the group
	// was shrunk or grown since).
	ErrStale = errors.New("stale epoch")
)
