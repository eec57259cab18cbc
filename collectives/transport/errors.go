package transport

import (
	"context"
	"errors"
	"fmt"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// Sentinel errors. Every error a Transport returns wraps one of them (or
// context.Canceled), together with the rank, the peer and the tag involved,
// so callers test them with errors.Is.
var (
	// ErrPeerLost: the peer closed, died or became unreachable.
	ErrPeerLost = errs.ErrPeerLost
	// ErrAborted: the collective (Group, Seq) was aborted by some rank;
	// errors.As with *AbortError gives the origin rank and the cause.
	ErrAborted = errs.ErrAborted
	// ErrClosed: this endpoint was closed.
	ErrClosed = errs.ErrClosed
	// ErrEvicted: this rank was dropped by its peers (silent past the peer
	// timeout); every later call fails with it.
	ErrEvicted = errs.ErrEvicted
	// ErrStale: the message's or call's group was retired (an old epoch).
	ErrStale = errs.ErrStale
	// ErrSizeMismatch: a message's size differs from the receive buffer's.
	ErrSizeMismatch = errors.New("message size mismatch")
	// ErrBadPeer: a peer rank out of range, or this rank itself.
	ErrBadPeer = errors.New("bad peer rank")
	// ErrTimeout: the context's deadline passed; such errors also wrap
	// context.DeadlineExceeded.
	ErrTimeout = errs.ErrTimeout
	// ErrBadArgument: a call had a malformed argument (for example the same
	// rank exposing twice under one tag).
	ErrBadArgument = errs.ErrBadArgument
)

// AbortError is the error an operation fails with when its collective
// (Group, Seq) was aborted by rank Origin for Cause (never nil). It
// matches ErrAborted with errors.Is and unwraps to Cause, so errors.Is
// also finds the cause's sentinels: in process the cause itself, across a
// wire its text and a cause code (CodeOf, RemoteCause) that keeps them.
type AbortError struct {
	Origin     int
	Group, Seq uint64
	Cause      error
}

func (e *AbortError) Error() string {
	return fmt.Sprintf("collective (group %d seq %d) aborted by rank %d: %v", e.Group, e.Seq, e.Origin, e.Cause)
}

func (e *AbortError) Is(target error) bool { return target == ErrAborted }

func (e *AbortError) Unwrap() error { return e.Cause }

// CtxError turns a finished context's error into the transport's form:
// a deadline wraps both ErrTimeout and context.DeadlineExceeded, a
// cancellation wraps context.Canceled (and its cause if one was given).
func CtxError(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	if c := context.Cause(ctx); c != nil && c != err {
		return fmt.Errorf("%w: %w", err, c)
	}
	return err
}
