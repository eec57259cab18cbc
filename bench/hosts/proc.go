package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// line is one output line of a rank and when the harness read it.
type line struct {
	text string
	at   time.Time
}

// proc is one rank process: its stdout and stderr (merged) kept line by
// line with the time each arrived. done is closed once the output has
// ended and the process has been reaped; code and exitAt are set before.
// The process leads a process group of its own and dies with the
// harness (Pdeathsig), even when the harness is killed outright.
type proc struct {
	name string
	cmd  *exec.Cmd

	mu     sync.Mutex
	out    []line
	news   chan struct{} // signalled on each line and at exit
	done   chan struct{}
	code   int
	exitAt time.Time
}

// children is every process the harness started and has not reaped, by
// pid, so that stop ends them on the way out (interrupt included); once
// stopped, no child starts. Safe for concurrent use.
type children struct {
	mu      sync.Mutex
	pids    map[int]bool
	stopped bool
}

// kids is the harness's one registry.
var kids = &children{pids: make(map[int]bool)}

// startProc starts argv with env added to the harness's environment.
func startProc(name string, argv, env []string) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("hosts: %s: %w", name, err)
	}
	cmd.Stderr = cmd.Stdout
	p := &proc{name: name, cmd: cmd, news: make(chan struct{}, 1), done: make(chan struct{})}
	kids.mu.Lock() // held across Start: stop cannot miss a child being born
	if kids.stopped {
		err = errStopped
	} else if err = cmd.Start(); err == nil {
		kids.pids[cmd.Process.Pid] = true
	}
	kids.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("hosts: start %s: %w", name, err)
	}
	go p.read(pipe)
	return p, nil
}

// read keeps the output, then reaps the process.
func (p *proc) read(pipe io.Reader) {
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		p.mu.Lock()
		p.out = append(p.out, line{sc.Text(), time.Now()})
		p.mu.Unlock()
		p.poke()
	}
	_ = p.cmd.Wait()
	kids.mu.Lock()
	delete(kids.pids, p.cmd.Process.Pid)
	kids.mu.Unlock()
	p.mu.Lock()
	p.code, p.exitAt = p.cmd.ProcessState.ExitCode(), time.Now()
	p.mu.Unlock()
	close(p.done)
	p.poke()
}

func (p *proc) poke() {
	select {
	case p.news <- struct{}{}:
	default:
	}
}

// signal sends sig to the process's group.
func (p *proc) signal(sig syscall.Signal) error { return syscall.Kill(-p.cmd.Process.Pid, sig) }

// lines is the output so far.
func (p *proc) lines() []line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]line(nil), p.out...)
}

// exited reports whether the process has ended, its exit code (-1 for a
// signal) and when the harness saw it end.
func (p *proc) exited() (bool, int, time.Time) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.code, p.exitAt
	default:
		return false, 0, time.Time{}
	}
}

// await waits until d has passed for a line that match accepts; it gives
// up early when the process ends without one.
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

// lastLine is the last output line that is not empty, cut to n bytes.
func (p *proc) lastLine(n int) string {
	ls := p.lines()
	for i := len(ls) - 1; i >= 0; i-- {
		if t := strings.TrimSpace(ls[i].text); t != "" {
			return clip(t, n)
		}
	}
	return "(no output)"
}

// errStopped is startProc's answer once the harness is ending.
var errStopped = errors.New("hosts: stopping: no new process")

// stop refuses every later start and sends SIGKILL to every registered
// child's process group.
func (c *children) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for pid := range c.pids {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // ESRCH: it has just exited
	}
}

// clip cuts s to n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
