package launch

import (
	"errors"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// Sentinels for what callers test with errors.Is. A Spec that cannot run
// wraps errs.ErrBadArgument; a launch whose deadline passed wraps
// errs.ErrTimeout.
var (
	// ErrBadArgument: the Spec cannot run (checked before anything starts).
	ErrBadArgument = errs.ErrBadArgument
	// ErrTimeout: Spec.Deadline passed and the ranks were stopped.
	ErrTimeout = errs.ErrTimeout
	// ErrFailed: a rank (or, across hosts, a node) exited unsuccessfully
	// and the others were stopped.
	ErrFailed = errors.New("rank failed")
	// ErrInterrupted: a signal stopped the launch.
	ErrInterrupted = errors.New("interrupted")
)

// ExitError is how a launch that did not succeed ends: Code is the status
// a launcher command should exit with (1 for a failure or a deadline,
// 128+signal for an interruption), and the message is one line of at most
// MaxSummary bytes. It wraps ErrFailed, ErrInterrupted or ErrTimeout
// (whose text it does not repeat).
type ExitError struct {
	Code int
	msg  string
	kind error
}

func (e *ExitError) Error() string { return e.msg }
func (e *ExitError) Unwrap() error { return e.kind }

// MaxSummary bounds the length in bytes of a launch's failure line, so
// that a command's name and ": " before it keep it within 200 characters.
const MaxSummary = 185
