package cluster

import (
	"github.com/choreo-gpu/choreo/actors/remoting"
	"github.com/choreo-gpu/choreo/internal/errs"
)

// The errors Join and the rendezvous wrap; they are the same values as
// collectives' (ErrPeerLost and the others), so either package's name
// matches them with errors.Is.
var (
	// ErrBadArgument: a JoinConfig (or what FromEnv read) is invalid.
	ErrBadArgument = errs.ErrBadArgument
	// ErrTimeout: the rendezvous did not complete in time.
	ErrTimeout = errs.ErrTimeout
	// ErrMismatch: a rank disagrees with rank 0 (world size, run,
	// protocol version, transport, a rank taken twice).
	ErrMismatch = errs.ErrMismatch
	// ErrPeerLost: a peer was lost during Join or later.
	ErrPeerLost = errs.ErrPeerLost
	// ErrAuth: a rank's control connection failed its handshake (the
	// secrets differ).
	ErrAuth = remoting.ErrAuth
)
