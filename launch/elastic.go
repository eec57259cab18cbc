package launch

import (
	"fmt"
	"syscall"
	"time"
)

// Loss is a rank an elastic launch (Spec.Elastic) lost: it had joined its
// group, then died or exited unsuccessfully while the others went on; or
// it was started in place of a lost one (Spec.MaxRestarts) and died or
// exited unsuccessfully, rejoined or not. A Loss is one process: a rank
// started again and lost again is lost twice.
type Loss struct {
	Rank int
	// Restart is which start of the rank the process was: 0 its first, n
	// its n-th restart (its CHOREO_RESTART_COUNT).
	Restart int
	// Joined is whether the process had joined its group (Joined); false
	// only for a restarted rank lost before it rejoined.
	Joined bool
	// Code is its exit status, or -1 when a signal ended it (Signal).
	Code   int
	Signal syscall.Signal
	// Status says how it ended: "exited 1", "killed by SIGKILL".
	Status string
	// After is how long it ran.
	After time.Duration
	// Last is its last line of output ("" if none); String leaves it out
	// for a rank a signal ended.
	Last string
	// Running is how many of the node's ranks were still running.
	Running int
	// NoRestart, in a launch with restarts (Spec.MaxRestarts), is why the
	// rank is not started again: "" when it is, and in a launch without.
	NoRestart string
}

// String is the loss in one line of at most MaxSummary bytes: "lost rank
// 2: killed by SIGKILL after 1.2s; 3 ranks go on", or for a rank that
// exited "lost rank 2: exited 1 after 1.2s; 3 ranks go on: <its last
// line>"; a restarted rank's says which restart ("lost rank 2 (restart
// 1): ..."), and whether it was lost before it rejoined ("lost rank 2
// (restart 1, before it rejoined): ...").
func (l Loss) String() string {
	head := fmt.Sprintf("lost rank %d", l.Rank)
	switch {
	case l.Restart > 0 && !l.Joined:
		head += fmt.Sprintf(" (restart %d, before it rejoined)", l.Restart)
	case l.Restart > 0:
		head += fmt.Sprintf(" (restart %d)", l.Restart)
	}
	head += ": " + l.Status
	if l.After > 0 {
		head += " after " + round(l.After).String()
	}
	switch l.Running {
	case 0:
		head += "; none goes on"
	case 1:
		head += "; 1 rank goes on"
	default:
		head += fmt.Sprintf("; %d ranks go on", l.Running)
	}
	if d := oneLine(l.Last); d != "" && l.Signal == 0 && len(head)+2 < MaxSummary { // a signal's victim explains nothing
		head += ": " + cut(d, MaxSummary-len(head)-2)
	}
	return cut(head, MaxSummary)
}

// lossOf is e as a Loss, with running ranks left and last its last line;
// it counts e's process as joined.
func lossOf(e exit, running int, last string) Loss {
	l := Loss{Rank: e.m.id, Restart: e.m.restart, Joined: true, Code: e.code(), Status: e.status(0), After: e.at.Sub(e.m.started),
		Last: last, Running: running}
	if e.state != nil {
		if ws, ok := e.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			l.Signal = ws.Signal()
		}
	}
	return l
}

// allLost is the verdict of an elastic launch whose every rank that ended
// by itself was lost, none succeeding.
func allLost(o outcome, what string, detail func(exit) string) error {
	last := o.lost[len(o.lost)-1]
	msg := fmt.Sprintf("every %s was lost, none succeeded; the last: %s %d %s after %s", what, what, last.m.id,
		last.status(0), round(last.at.Sub(last.m.started)))
	if d := oneLine(detail(last)); d != "" && len(msg)+2 < MaxSummary {
		msg += ": " + cut(d, MaxSummary-len(msg)-2)
	}
	return &ExitError{Code: 1, msg: cut(msg, MaxSummary), kind: ErrFailed}
}
