package launch

import (
	"fmt"
	"syscall"
	"time"
)

// Loss is a rank an elastic launch (Spec.Elastic) lost: it had joined its
// group, then died or exited unsuccessfully while the others went on.
type Loss struct {
	Rank int
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
}

// String is the loss in one line of at most MaxSummary bytes: "lost rank
// 2: killed by SIGKILL after 1.2s; 3 ranks go on", or for a rank that
// exited "lost rank 2: exited 1 after 1.2s; 3 ranks go on: <its last
// line>".
func (l Loss) String() string {
	head := fmt.Sprintf("lost rank %d: %s after %s", l.Rank, l.Status, round(l.After))
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

// lossOf is e as a Loss, with running ranks left and last its last line.
func lossOf(e exit, running int, last string) Loss {
	l := Loss{Rank: e.m.id, Code: e.code(), Status: e.status(0), After: e.at.Sub(e.m.started), Last: last, Running: running}
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
