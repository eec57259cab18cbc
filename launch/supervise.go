package launch

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// member is one process a launcher started and supervises: a rank, or,
// across hosts, the SSH command running a node.
type member struct {
	id int // the rank, or the node
	// restart is which start of its rank this process is: 0 the first, n
	// its n-th replacement in an elastic launch (its CHOREO_RESTART_COUNT).
	restart   int
	cmd       *exec.Cmd
	out, errw *lineWriter
	// stop asks it to stop (SIGTERM) or ends it (SIGKILL).
	stop      func(sig syscall.Signal)
	started   time.Time
	signalled bool // the launcher asked it to stop (supervise's goroutine only)
	exited    bool
}

// exit is how a member's process ended: state is nil when Wait failed
// without one.
type exit struct {
	m     *member
	state *os.ProcessState
	err   error
	at    time.Time
}

func (e exit) ok() bool { return e.err == nil && e.state != nil && e.state.Success() }

// code is the exit status, -1 when a signal ended it or none is known.
func (e exit) code() int {
	if e.state == nil {
		return -1
	}
	return e.state.ExitCode()
}

// status says how it ended: "exited 1", "killed by SIGKILL", or Wait's
// error.
func (e exit) status(peerLost int) string {
	switch {
	case e.state == nil && e.err != nil:
		return e.err.Error()
	case e.state == nil:
		return "ended"
	case peerLost != 0 && e.code() == peerLost:
		return fmt.Sprintf("exited %d (lost a peer)", peerLost)
	case e.code() >= 0:
		return fmt.Sprintf("exited %d", e.code())
	}
	if ws, ok := e.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + signalName(ws.Signal())
	}
	return e.state.String()
}

// signalName is "SIGKILL" and the like.
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGBUS:
		return "SIGBUS"
	}
	return fmt.Sprintf("signal %d", int(s))
}

// group is the processes of one launch. Every started member's exit
// arrives on exits exactly once. Only supervise (one goroutine) touches
// the members' flags.
type group struct {
	members  []*member
	exits    chan exit
	grace    time.Duration
	peerLost int // PeerLostExit
	// joined, set in an elastic launch, reports whether a member's process
	// has joined its group: its failure is then a loss, not the launch's
	// end.
	joined func(m *member) bool
	// onLost, if set, hears of each loss and of how many members are still
	// running. It may start a member in the lost one's place (with start)
	// and return it, which supervise then waits for as for the others; or
	// return nil.
	onLost func(e exit, running int) *member
}

func newGroup(n int, grace time.Duration, peerLost int) *group {
	return &group{exits: make(chan exit, n), grace: grace, peerLost: peerLost}
}

// start starts m (its cmd set up) and reports its exit on g.exits.
func (g *group) start(m *member) error {
	m.cmd.SysProcAttr = procAttr()
	m.cmd.WaitDelay = g.grace // output held open by a descendant stops mattering then
	if err := m.cmd.Start(); err != nil {
		return err
	}
	m.started = time.Now()
	g.members = append(g.members, m)
	go func() {
		err := m.cmd.Wait()
		m.out.Flush()
		m.errw.Flush()
		g.exits <- exit{m: m, state: m.cmd.ProcessState, err: err, at: time.Now()}
	}()
	return nil
}

// pids is every started member's process id.
func (g *group) pids() []int {
	ps := make([]int, 0, len(g.members))
	for _, m := range g.members {
		ps = append(ps, m.cmd.Process.Pid)
	}
	return ps
}

// signal asks every member still running to stop (SIGTERM) or kills it.
func (g *group) signal(sig syscall.Signal) {
	for _, m := range g.members {
		if !m.exited {
			m.signalled = true
			m.stop(sig)
		}
	}
}

// abort kills every member started and reaps them, bounded.
func (g *group) abort() {
	g.signal(syscall.SIGKILL)
	g.reap(reapTimeout)
}

// reap collects the exits of the members still running, at most for d;
// it returns how many did not exit in time.
func (g *group) reap(d time.Duration) int {
	timeout := time.After(d)
	for {
		left := 0
		for _, m := range g.members {
			if !m.exited {
				left++
			}
		}
		if left == 0 {
			return 0
		}
		select {
		case e := <-g.exits:
			e.m.exited = true
		case <-timeout:
			return left
		}
	}
}

// outcome is how a launch's members ended.
type outcome struct {
	failed      []exit // exits not caused by the launcher, in order (losses aside)
	lost        []exit // an elastic launch's members lost after they joined, in order
	succeeded   int    // members that exited 0 by themselves
	stopped     int    // members the launcher asked to stop
	interrupted os.Signal
	timedOut    bool
	left        int // members still running after SIGKILL and reapTimeout
}

// first is the failure to name: the first that did not merely lose a peer,
// else the first.
func (o outcome) first(peerLost int) exit {
	for _, e := range o.failed {
		if peerLost == 0 || e.code() != peerLost {
			return e
		}
	}
	return o.failed[0]
}

// isLoss reports whether the failed exit e is, in an elastic launch, a
// loss the others go on without: its member had joined its group, or was
// started in place of a lost one (the others went on without its rank
// before it started, and go on without it as well, whether or not it
// rejoined); no member has yet succeeded (the end has not begun) and
// nothing is stopping the launch.
func (g *group) isLoss(e exit, o outcome) bool {
	return g.joined != nil && (e.m.restart > 0 || g.joined(e.m)) && o.succeeded == 0 && len(o.failed) == 0 &&
		o.interrupted == nil && !o.timedOut
}

// supervise waits for every member. When one fails, or a signal arrives
// on sigs, or deadline passes, it stops the rest: SIGTERM (or its
// equivalent) to each, then SIGKILL once the grace period has passed
// since the first failure (since the stop otherwise); a second signal
// kills at once. Every wait is bounded once stopping has begun: every
// member is gone within the grace period (and reapTimeout) of the first
// failed exit. A member that fails because it lost a peer (peerLost)
// gives the one that failed first up to peerLostWindow (at most the grace
// period) to show itself before the rest are asked to stop. In an
// elastic launch a member lost after it joined (isLoss) stops nothing,
// and the member onLost starts in its place is supervised as the others.
func (g *group) supervise(sigs <-chan os.Signal, deadline <-chan time.Time) outcome {
	var (
		o              outcome
		stopping       bool
		stopAt, killAt <-chan time.Time
		reapBy         <-chan time.Time
		running        = len(g.members)
		firstFailure   time.Time // zero until a member fails
		stop           = func() {
			if !stopping {
				stopping = true
				g.signal(syscall.SIGTERM)
				wait := g.grace
				if !firstFailure.IsZero() {
					wait -= time.Since(firstFailure)
				}
				killAt = time.After(max(wait, 0))
			}
		}
	)
	for running > 0 {
		select {
		case e := <-g.exits:
			running--
			e.m.exited = true
			if e.m.signalled {
				continue
			}
			if e.ok() {
				o.succeeded++
				continue
			}
			if g.isLoss(e, o) {
				o.lost = append(o.lost, e)
				if g.onLost != nil && g.onLost(e, running) != nil {
					running++
				}
				continue
			}
			o.failed = append(o.failed, e)
			if firstFailure.IsZero() {
				firstFailure = e.at
			}
			if g.peerLost != 0 && e.code() == g.peerLost && stopAt == nil {
				stopAt = time.After(min(peerLostWindow, g.grace))
				continue
			}
			stop()
		case <-stopAt:
			stop()
		case sig := <-sigs:
			if o.interrupted != nil {
				g.signal(syscall.SIGKILL)
				continue
			}
			o.interrupted = sig
			stop()
		case <-deadline:
			o.timedOut = true
			stop()
		case <-killAt:
			g.signal(syscall.SIGKILL)
			reapBy = time.After(reapTimeout)
		case <-reapBy:
			o.left = g.reap(0)
			running = 0
		}
	}
	for _, m := range g.members {
		if m.signalled {
			o.stopped++
		}
	}
	return o
}
