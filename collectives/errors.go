package collectives

import (
	"errors"

	"github.com/choreo-gpu/choreo/internal/errs"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/fence"
)

// Sentinel errors callers test with errors.Is. Most are the lower layers'
// own sentinels, re-exported so users need only this package.
var (
	// ErrPeerLost: a peer closed or died.
	ErrPeerLost = transport.ErrPeerLost
	// ErrTimeout: the collective's deadline passed.
	ErrTimeout = transport.ErrTimeout
	// ErrAborted: another rank failed the collective; the cause is wrapped.
	ErrAborted = transport.ErrAborted
	// ErrMismatch: ranks called different collectives at the same position.
	ErrMismatch = algo.ErrMismatch
	// ErrShapeMismatch: ranks disagree on the shape or dtype (also matches
	// ErrMismatch).
	ErrShapeMismatch = algo.ErrShapeMismatch
	// ErrBadOp: an unknown reduce op.
	ErrBadOp = reduce.ErrBadOp
	// ErrBadPeer: a send/recv peer out of range, or send/recv to self
	// (always so in a group of size 1). A broadcast root out of range
	// is ErrBadArgument.
	ErrBadPeer = transport.ErrBadPeer
	// ErrReleased: the fence guarding an output was released by failure;
	// every failed output matches it.
	ErrReleased = fence.ErrReleased
	// ErrTooLarge: a payload over the group's configured limit (WithMaxBytes).
	ErrTooLarge = errs.ErrTooLarge
	// ErrBadArgument: a nil stream or array, a failed input, a bad shape.
	ErrBadArgument = algo.ErrBadArgument
	// ErrClosed: the group is closed (also what a collective that was
	// pending when its group closed fails with), or Shrink replaced it.
	ErrClosed = errs.ErrClosed
	// ErrEvicted: this rank was left out of its group (Shrink's survivors
	// lost it, or its transport dropped it after a silence past the peer
	// timeout); it must not write into the group's later epochs.
	ErrEvicted = transport.ErrEvicted
	// ErrStale: a call or message of a group that Shrink replaced.
	ErrStale = transport.ErrStale
	// ErrCrossStream: the input is produced on another GPU stream and not
	// complete yet; wait for it (or use its stream) first.
	ErrCrossStream = fence.ErrCrossStream
	// ErrFreed: the input's memory was freed (Array.Free) before the call.
	ErrFreed = array.ErrFreed
	// ErrWouldDeadlock: the call's GPU side would wait behind a GPU-side
	// wait that needs this very call to pass: ranks of one collective share
	// a GPU stream, or groups sharing streams are issued in different
	// orders on different ranks (see ledger).
	ErrWouldDeadlock = errors.New("GPU stream order would deadlock")
)
