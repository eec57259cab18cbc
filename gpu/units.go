package gpu

import (
	"errors"
	"fmt"
	"strings"
)

// A batch may be split into units: independent runs of commands that share
// one submission. A command that fails skips the rest of its own unit only;
// the units after it still run, in order. Streams make each caller's
// message a unit, so one caller's bad command never fails another's work.
//
// Units are given as ends: ends[i] is the index one past unit i's last
// command; ends is strictly increasing and its last entry is len(batch).
// Empty ends (nil or of length 0) make the whole batch one unit, whose
// failure done reports as a plain error, as for Submit.

// UnitError is the failure of one unit of a batch: the index of the unit,
// the index in the batch of the command that failed, and why.
type UnitError struct {
	Unit    int
	Command int
	Err     error
}

func (e UnitError) Error() string {
	return fmt.Sprintf("unit %d, command %d: %v", e.Unit, e.Command, e.Err)
}

func (e UnitError) Unwrap() error { return e.Err }

// BatchError is what a Queue's done callback receives when units of a
// SubmitUnits batch failed: one entry per failed unit, in unit order.
// errors.Is and errors.As see every unit's cause.
type BatchError struct {
	Units []UnitError
}

func (e *BatchError) Error() string {
	parts := make([]string, len(e.Units))
	for i, u := range e.Units {
		parts[i] = u.Error()
	}
	return "batch: " + strings.Join(parts, "; ")
}

// Unwrap returns every failed unit's cause.
func (e *BatchError) Unwrap() []error {
	errs := make([]error, len(e.Units))
	for i, u := range e.Units {
		errs[i] = u.Err
	}
	return errs
}

// UnitErr returns the error of unit u in err, the value a SubmitUnits done
// callback received: nil if u ran to completion, the unit's own error if
// it failed, and err itself if err is not a *BatchError (a failure of the
// whole batch, such as a closed queue).
func UnitErr(err error, u int) error {
	if err == nil {
		return nil
	}
	var be *BatchError
	if !errors.As(err, &be) {
		return err
	}
	for _, ue := range be.Units {
		if ue.Unit == u {
			return ue
		}
	}
	return nil
}

// ValidateUnits checks ends against a batch of n commands: every unit
// has at least one command, and the units cover the batch (empty ends
// always pass: one unit). Errors wrap ErrBadArgument.
func ValidateUnits(n int, ends []int) error {
	prev := 0
	for i, e := range ends {
		if e <= prev || e > n {
			return fmt.Errorf("units: end %d of unit %d out of order in a batch of %d: %w", e, i, n, ErrBadArgument)
		}
		prev = e
	}
	if len(ends) > 0 && prev != n {
		return fmt.Errorf("units: last end %d, batch of %d: %w", prev, n, ErrBadArgument)
	}
	return nil
}
