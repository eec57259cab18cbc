package transport

import (
	"context"
	"errors"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// CauseCode names, one bit each, the sentinels an abort cause wraps, so
// that a cause which crosses a wire as text keeps its identity: a network
// transport sends CodeOf(cause) beside cause.Error(), and the receiving
// rank rebuilds the cause with RemoteCause, which errors.Is matches against
// exactly those sentinels. Bits are part of wire formats: never renumber.
type CauseCode uint32

// The sentinels a CauseCode can carry.
const (
	CauseClosed           CauseCode = 1 << iota // errs.ErrClosed
	CauseTimeout                                // errs.ErrTimeout
	CausePeerLost                               // errs.ErrPeerLost
	CauseAborted                                // errs.ErrAborted
	CauseBadArgument                            // errs.ErrBadArgument
	CauseMismatch                               // errs.ErrMismatch
	CauseShapeMismatch                          // errs.ErrShapeMismatch
	CauseTooLarge                               // errs.ErrTooLarge
	CauseSizeMismatch                           // ErrSizeMismatch
	CauseBadPeer                                // ErrBadPeer
	CauseCanceled                               // context.Canceled
	CauseDeadlineExceeded                       // context.DeadlineExceeded
	CauseEvicted                                // errs.ErrEvicted
	CauseStale                                  // errs.ErrStale
)

var causeSentinels = [...]error{
	errs.ErrClosed,
	errs.ErrTimeout,
	errs.ErrPeerLost,
	errs.ErrAborted,
	errs.ErrBadArgument,
	errs.ErrMismatch,
	errs.ErrShapeMismatch,
	errs.ErrTooLarge,
	ErrSizeMismatch,
	ErrBadPeer,
	context.Canceled,
	context.DeadlineExceeded,
	errs.ErrEvicted,
	errs.ErrStale,
}

// CodeOf returns the bits of every sentinel err matches with errors.Is
// (0 for nil or an error that wraps none of them).
func CodeOf(err error) CauseCode {
	if err == nil {
		return 0
	}
	var c CauseCode
	for i, s := range causeSentinels {
		if errors.Is(err, s) {
			c |= 1 << i
		}
	}
	return c
}

// RemoteError is an error rebuilt from the text and the CauseCode another
// rank sent: Error returns the text, and errors.Is matches the sentinels
// whose bits Code has (unknown bits are ignored).
type RemoteError struct {
	Code CauseCode
	Text string
}

func RemoteCause(code CauseCode, text string) error {
	return &RemoteError{Code: code, Text: text}
}

func (e *RemoteError) Error() string { return e.Text }

func (e *RemoteError) Is(target error) bool {
	for i, s := range causeSentinels {
		if e.Code&(1<<i) != 0 && target == s {
			return true
		}
	}
	return false
}
