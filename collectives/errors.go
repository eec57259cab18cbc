package collectives

import (
	"errors"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/fence"
)

// Sentinel errors callers test with errors.Is. Most are the lower layers'
// own sentinels, re-exported so users need only this package.
var (
	// ErrPeerLost: a peer closed or died (R19).
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
	// ErrBadPeer: a peer or root rank out of range, or send/recv to self
	// (always so in a group of size 1, R17).
	ErrBadPeer = transport.ErrBadPeer
	// ErrReleased: the fence guarding an output was released by failure;
	// every failed output matches it.
	ErrReleased = fence.ErrReleased
	// ErrTooLarge: a payload over the group's configured limit (R18).
	ErrTooLarge = errors.New("payload over the configured limit")
	// ErrBadArgument: a nil stream or array, a failed input, a bad shape.
	ErrBadArgument = algo.ErrBadArgument
	// ErrClosed: the group is closed.
	ErrClosed = errors.New("group closed")
)
