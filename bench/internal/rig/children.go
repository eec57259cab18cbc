package rig

import (
	"errors"
	"os/exec"
	"sync"
	"syscall"
)

// ErrStopped is Children.Start's answer once Stop has been called: the
// harness is ending and starts no new process.
var ErrStopped = errors.New("rig: stopping: no new process")

// Children is every process a harness has started and not yet reaped, by
// process id. Each child leads a process group of its own and is killed by
// the kernel if the harness dies, even by SIGKILL (Pdeathsig follows the
// thread that started the child; the harnesses lock no goroutine to a
// thread, so Go never ends that thread while they run). KillAll and Stop
// end every child, stopped ones included (SIGKILL needs no SIGCONT). Safe
// for concurrent use; the zero value is not, use NewChildren.
type Children struct {
	mu      sync.Mutex
	pids    map[int]struct{}
	stopped bool
}

// NewChildren is an empty registry.
func NewChildren() *Children { return &Children{pids: make(map[int]struct{})} }

// Start starts cmd as a registered child in its own process group; after
// Stop it starts nothing and returns ErrStopped.
func (c *Children) Start(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.mu.Lock()
	defer c.mu.Unlock() // held across Start, so KillAll cannot miss a child being born
	if c.stopped {
		return ErrStopped
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	c.pids[cmd.Process.Pid] = struct{}{}
	return nil
}

// done forgets pid once it has been reaped.
func (c *Children) done(pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pids, pid)
}

// Len is how many children are registered (started, not yet reaped).
func (c *Children) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pids)
}

// KillAll sends SIGKILL to every registered child's process group.
func (c *Children) KillAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for pid := range c.pids {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // ESRCH: it has just exited
	}
}

// Stop refuses every later Start, then kills every registered child as
// KillAll does.
func (c *Children) Stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.KillAll()
}
