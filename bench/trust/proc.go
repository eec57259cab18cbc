package main

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

// line is one output line of a child and when the harness read it.
type line struct {
	text string
	at   time.Time
}

// proc is one child process the harness started, its stdout and stderr
// (merged) kept line by line with the time each arrived. done is closed
// once the output has ended and the process has been reaped; exitAt and
// state are set before that.
type proc struct {
	name    string
	cmd     *exec.Cmd
	started time.Time

	mu     sync.Mutex
	out    []line
	news   chan struct{} // signalled on each line and at exit
	done   chan struct{}
	exitAt time.Time
	state  *os.ProcessState
	err    error // Wait's
}

// startProc starts argv[0] with argv[1:] and env added to the harness's
// environment, as a registered child (kids).
func startProc(name string, argv, env []string) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("trust: %s: %w", name, err)
	}
	cmd.Stderr = cmd.Stdout
	p := &proc{name: name, cmd: cmd, news: make(chan struct{}, 1), done: make(chan struct{})}
	if err := kids.start(cmd); err != nil {
		return nil, fmt.Errorf("trust: start %s: %w", name, err)
	}
	p.started = time.Now()
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out = append(p.out, line{sc.Text(), time.Now()})
			p.mu.Unlock()
			p.poke()
		}
		err := cmd.Wait()
		kids.done(cmd.Process.Pid)
		p.mu.Lock()
		p.exitAt, p.state, p.err = time.Now(), cmd.ProcessState, err
		p.mu.Unlock()
		close(p.done)
		p.poke()
	}()
	return p, nil
}

func (p *proc) poke() {
	select {
	case p.news <- struct{}{}:
	default:
	}
}

// pid is the process's id (and its process group's).
func (p *proc) pid() int { return p.cmd.Process.Pid }

// signal sends sig to the process's group.
func (p *proc) signal(sig syscall.Signal) error { return signalGroup(p.pid(), sig) }

// lines is the output so far.
func (p *proc) lines() []line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]line(nil), p.out...)
}

// exited reports whether the process has ended, and if so its exit code
// (-1 for a signal) and when the harness saw it end.
func (p *proc) exited() (ended bool, code int, at time.Time) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.state.ExitCode(), p.exitAt
	default:
		return false, 0, time.Time{}
	}
}

// await waits until d has passed for a line that match accepts and
// returns it; it gives up early, returning false, when the process ends
// without one.
func (p *proc) await(d time.Duration, match func(string) bool) (line, bool) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	seen := 0
	for {
		ls := p.lines()
		for _, l := range ls[seen:] {
			if match(l.text) {
				return l, true
			}
		}
		seen = len(ls)
		select {
		case <-p.done:
			for _, l := range p.lines()[seen:] {
				if match(l.text) {
					return l, true
				}
			}
			return line{}, false
		case <-p.news:
		case <-deadline.C:
			return line{}, false
		}
	}
}

// find is the first line so far that match accepts.
func (p *proc) find(match func(string) bool) (line, bool) {
	for _, l := range p.lines() {
		if match(l.text) {
			return l, true
		}
	}
	return line{}, false
}

// wait waits up to d for the process to end.
func (p *proc) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// kill ends the process's group and waits (up to 10 s) for it.
func (p *proc) kill() {
	_ = p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)
}

// transcript is the output with each line's time since t0, led by tag.
func (p *proc) transcript(t0 time.Time, tag string) string {
	var b strings.Builder
	for _, l := range p.lines() {
		fmt.Fprintf(&b, "%+9.3fs %s %s\n", l.at.Sub(t0).Seconds(), tag, l.text)
	}
	if ended, code, at := p.exited(); ended {
		fmt.Fprintf(&b, "%+9.3fs %s (exit %d)\n", at.Sub(t0).Seconds(), tag, code)
	} else {
		fmt.Fprintf(&b, "          %s (still running)\n", tag)
	}
	return b.String()
}

// lastLine is the last output line that is not empty, cut to n bytes.
func (p *proc) lastLine(n int) string {
	ls := p.lines()
	for i := len(ls) - 1; i >= 0; i-- {
		if t := strings.TrimSpace(ls[i].text); t != "" {
			return clip(t, n)
		}
	}
	return ""
}

// clip cuts s to n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
