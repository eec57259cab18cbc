package rig

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Line is one output line of a child process and when the harness read it.
type Line struct {
	Text string
	At   time.Time
}

// Proc is one child process a harness started, its stdout and stderr
// (merged) kept line by line with the time each arrived. Its methods are
// safe for concurrent use; once the output has ended and the process has
// been reaped, Exited reports it.
type Proc struct {
	Name    string
	Started time.Time

	cmd    *exec.Cmd
	mu     sync.Mutex
	out    []Line
	news   chan struct{} // signalled on each line and at exit
	done   chan struct{}
	exitAt time.Time
	code   int
}

// StartProc starts argv[0] with argv[1:] and env added to the harness's
// environment, as a child registered with kids.
func StartProc(kids *Children, name string, argv, env []string) (*Proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("rig: %s: %w", name, err)
	}
	cmd.Stderr = cmd.Stdout
	p := &Proc{Name: name, cmd: cmd, news: make(chan struct{}, 1), done: make(chan struct{})}
	if err := kids.Start(cmd); err != nil {
		return nil, fmt.Errorf("rig: start %s: %w", name, err)
	}
	p.Started = time.Now()
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out = append(p.out, Line{sc.Text(), time.Now()})
			p.mu.Unlock()
			p.poke()
		}
		_ = cmd.Wait()
		kids.done(cmd.Process.Pid)
		p.mu.Lock()
		p.exitAt, p.code = time.Now(), cmd.ProcessState.ExitCode()
		p.mu.Unlock()
		close(p.done)
		p.poke()
	}()
	return p, nil
}

// ProcOf is a Proc that started nothing: it holds lines as its output so
// far and never ends, for tests of what reads a process's output.
func ProcOf(name string, lines ...string) *Proc {
	p := &Proc{Name: name, news: make(chan struct{}, 1), done: make(chan struct{})}
	for _, l := range lines {
		p.out = append(p.out, Line{Text: l})
	}
	return p
}

func (p *Proc) poke() {
	select {
	case p.news <- struct{}{}:
	default:
	}
}

// Pid is the process's id (and its process group's).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process's group.
func (p *Proc) Signal(sig syscall.Signal) error { return syscall.Kill(-p.Pid(), sig) }

// Lines is the output so far.
func (p *Proc) Lines() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Line(nil), p.out...)
}

// Exited reports whether the process has ended, and if so its exit code
// (-1 for a signal) and when the harness saw it end.
func (p *Proc) Exited() (ended bool, code int, at time.Time) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.code, p.exitAt
	default:
		return false, 0, time.Time{}
	}
}

// Await waits until d has passed for a line that match accepts and returns
// it; it gives up early, returning false, when the process ends without
// one.
func (p *Proc) Await(d time.Duration, match func(string) bool) (Line, bool) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	seen := 0
	for {
		ls := p.Lines()
		for _, l := range ls[seen:] {
			if match(l.Text) {
				return l, true
			}
		}
		seen = len(ls)
		select {
		case <-p.done:
			for _, l := range p.Lines()[seen:] {
				if match(l.Text) {
					return l, true
				}
			}
			return Line{}, false
		case <-p.news:
		case <-deadline.C:
			return Line{}, false
		}
	}
}

// Find is the first line so far that match accepts.
func (p *Proc) Find(match func(string) bool) (Line, bool) {
	for _, l := range p.Lines() {
		if match(l.Text) {
			return l, true
		}
	}
	return Line{}, false
}

// Wait waits up to d for the process to end.
func (p *Proc) Wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Kill ends the process's group and waits (up to 10 s) for it.
func (p *Proc) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	p.Wait(10 * time.Second)
}

// Transcript is the output with each line's time since t0, led by tag,
// and how the process ended if it has.
func (p *Proc) Transcript(t0 time.Time, tag string) string {
	var b strings.Builder
	for _, l := range p.Lines() {
		fmt.Fprintf(&b, "%+9.3fs %s %s\n", l.At.Sub(t0).Seconds(), tag, l.Text)
	}
	if ended, code, at := p.Exited(); ended {
		fmt.Fprintf(&b, "%+9.3fs %s (exit %d)\n", at.Sub(t0).Seconds(), tag, code)
	} else {
		fmt.Fprintf(&b, "          %s (still running)\n", tag)
	}
	return b.String()
}

// LastLine is the last output line that is not empty, cut to n bytes; ""
// when there is none.
func (p *Proc) LastLine(n int) string {
	ls := p.Lines()
	for i := len(ls) - 1; i >= 0; i-- {
		if t := strings.TrimSpace(ls[i].Text); t != "" {
			return Clip(t, n)
		}
	}
	return ""
}

// Clip cuts s to n bytes, marking the cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
