package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Exit statuses.
const (
	// exitPeerLost is a rank's status when it failed because another rank
	// was lost: the launcher then looks for the rank that failed first.
	exitPeerLost = 3
	// reapTimeout bounds the wait for ranks after SIGKILL.
	reapTimeout = 5 * time.Second
	// peerLostWindow bounds how long the launcher, having seen a rank that
	// lost a peer, waits for the rank that failed first before it stops the
	// rest.
	peerLostWindow = time.Second
)

// exitError is an error with the exit status the demo ends with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// rankProc is one started rank: its process and its output writers.
type rankProc struct {
	rank      int
	cmd       *exec.Cmd
	out, errw *prefixWriter
	signalled bool // the launcher asked it to stop (supervise's goroutine only)
	exited    bool
}

// rankExit is how a rank's process ended: state is nil when Wait failed
// without one.
type rankExit struct {
	rank  int
	state *os.ProcessState
	err   error
}

func (e rankExit) ok() bool { return e.err == nil && e.state != nil && e.state.Success() }

// String names the status: "exit status 1", "signal: killed", or Wait's error.
func (e rankExit) String() string {
	switch {
	case e.state != nil && e.state.ExitCode() == exitPeerLost:
		return fmt.Sprintf("exit status %d (lost a peer)", exitPeerLost)
	case e.state != nil:
		return e.state.String()
	case e.err != nil:
		return e.err.Error()
	}
	return "unknown status"
}

// cluster is the rank processes of one launch. Each rank runs in a
// process group of its own (rankProcAttr), so that a signal reaches all it
// started; its stdout and stderr lines reach the launcher's, led by
// "[rank] ". Every started rank's exit arrives on exits exactly once.
// Only supervise (one goroutine) touches the rankProcs' flags.
type cluster struct {
	ranks []*rankProc
	exits chan rankExit
	grace time.Duration
}

// startCluster starts n ranks: exe with argv, the environment plus
// env(rank). If one cannot start, those started are killed and reaped.
func startCluster(n int, exe string, argv []string, env func(rank int) []string,
	stdout, stderr io.Writer, grace time.Duration) (*cluster, error) {
	c := &cluster{exits: make(chan rankExit, n), grace: grace}
	sink := &lineSink{}
	width := len(fmt.Sprint(n - 1))
	for r := range n {
		prefix := fmt.Sprintf("[%*d] ", width, r)
		p := &rankProc{rank: r, out: newPrefixWriter(sink, stdout, prefix), errw: newPrefixWriter(sink, stderr, prefix)}
		p.cmd = exec.Command(exe, argv...)
		p.cmd.Env = append(os.Environ(), env(r)...)
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.errw
		p.cmd.SysProcAttr = rankProcAttr()
		p.cmd.WaitDelay = grace // output held open by a descendant stops mattering then
		if err := p.cmd.Start(); err != nil {
			c.signal(syscall.SIGKILL)
			c.reap(reapTimeout)
			return nil, fmt.Errorf("start rank %d: %w", r, err)
		}
		c.ranks = append(c.ranks, p)
		go func() {
			err := p.cmd.Wait()
			p.out.Flush()
			p.errw.Flush()
			c.exits <- rankExit{rank: p.rank, state: p.cmd.ProcessState, err: err}
		}()
	}
	return c, nil
}

// pids is every started rank's process id.
func (c *cluster) pids() []int {
	var ps []int
	for _, p := range c.ranks {
		ps = append(ps, p.cmd.Process.Pid)
	}
	return ps
}

// signal sends sig to the process group of every rank still running.
func (c *cluster) signal(sig syscall.Signal) {
	for _, p := range c.ranks {
		if !p.exited {
			p.signalled = true
			_ = syscall.Kill(-p.cmd.Process.Pid, sig) // ESRCH: it has just exited
		}
	}
}

// reap collects the exits of the ranks still running, at most for d; it
// returns the ranks that did not exit in time.
func (c *cluster) reap(d time.Duration) []int {
	timeout := time.After(d)
	for {
		var left []int
		for _, p := range c.ranks {
			if !p.exited {
				left = append(left, p.rank)
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case e := <-c.exits:
			c.ranks[e.rank].exited = true
		case <-timeout:
			return left
		}
	}
}

// supervise waits for every rank. When one fails, or a signal arrives on
// sigs, or deadline passes, it stops the rest: SIGTERM to each group, then
// SIGKILL once the grace period has passed since the first failure (since
// the stop otherwise); a second signal kills at once. Every wait is
// bounded once stopping has begun: with or without a deadline, every rank
// is gone within the grace period (and reapTimeout) of the first failed
// exit. A rank that fails because it lost a peer (exitPeerLost) gives the
// rank that failed first up to peerLostWindow (at most the grace period)
// to show itself before the rest are asked to stop.
func (c *cluster) supervise(sigs <-chan os.Signal, deadline <-chan time.Time) error {
	var (
		failed         []rankExit // exits not caused by the launcher, in order
		stopping       bool
		interrupted    os.Signal
		timedOut       bool
		stopAt, killAt <-chan time.Time
		reapBy         <-chan time.Time
		running        = len(c.ranks)
		firstFailure   time.Time // zero until a rank fails
		stop           = func() {
			if !stopping {
				stopping = true
				c.signal(syscall.SIGTERM)
				wait := c.grace
				if !firstFailure.IsZero() {
					wait -= time.Since(firstFailure)
				}
				killAt = time.After(max(wait, 0))
			}
		}
	)
	for running > 0 {
		select {
		case e := <-c.exits:
			running--
			p := c.ranks[e.rank]
			p.exited = true
			if e.ok() || p.signalled {
				continue
			}
			failed = append(failed, e)
			if firstFailure.IsZero() {
				firstFailure = time.Now()
			}
			if e.state != nil && e.state.ExitCode() == exitPeerLost && stopAt == nil {
				stopAt = time.After(min(peerLostWindow, c.grace))
				continue
			}
			stop()
		case <-stopAt:
			stop()
		case sig := <-sigs:
			if interrupted != nil {
				c.signal(syscall.SIGKILL)
				continue
			}
			interrupted = sig
			stop()
		case <-deadline:
			timedOut = true
			stop()
		case <-killAt:
			c.signal(syscall.SIGKILL)
			reapBy = time.After(reapTimeout)
		case <-reapBy:
			left := c.reap(0)
			return fmt.Errorf("ranks %v still running %v after SIGKILL", left, reapTimeout)
		}
	}
	return c.outcome(failed, interrupted, timedOut)
}

// outcome is supervise's verdict once every rank has exited.
func (c *cluster) outcome(failed []rankExit, interrupted os.Signal, timedOut bool) error {
	var stopped []int
	for _, p := range c.ranks {
		if p.signalled {
			stopped = append(stopped, p.rank)
		}
	}
	also := ""
	if len(stopped) > 0 {
		also = fmt.Sprintf("; stopped %s", rankList(stopped))
	}
	switch {
	case interrupted != nil:
		code := 130
		if s, ok := interrupted.(syscall.Signal); ok {
			code = 128 + int(s)
		}
		return &exitError{code, fmt.Errorf("interrupted (%v)%s", interrupted, also)}
	case len(failed) > 0:
		first := failed[0]
		if i := slices.IndexFunc(failed, func(e rankExit) bool {
			return e.state == nil || e.state.ExitCode() != exitPeerLost
		}); i >= 0 {
			first = failed[i] // the one that did not merely lose a peer
		}
		for _, e := range failed {
			if e.rank != first.rank {
				also += fmt.Sprintf("; rank %d: %v", e.rank, e)
			}
		}
		return &exitError{1, fmt.Errorf("rank %d failed: %v%s", first.rank, first, also)}
	case timedOut:
		return &exitError{1, fmt.Errorf("deadline passed%s", also)}
	}
	return nil
}

// rankList is "rank 2" or "ranks 0, 1, 3".
func rankList(rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprint(r)
	}
	if len(rs) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ", ")
}
