package main

import (
	"os/exec"
	"sync"
	"syscall"
)

// children is every process the harness has started and not yet reaped,
// by process id. Each child leads a process group of its own
// (childAttr), so a signal to the group reaches whatever it started;
// killAll ends them all, stopped ones included (SIGKILL needs no
// SIGCONT). Safe for concurrent use.
type children struct {
	mu   sync.Mutex
	pids map[int]struct{}
}

// kids is the harness's one registry.
var kids = &children{pids: make(map[int]struct{})}

// childAttr puts a child in a process group of its own and has the kernel
// kill it if the harness dies, even by SIGKILL (Pdeathsig follows the
// thread that started the child; the harness locks no goroutine to a
// thread, so Go never ends that thread while the harness runs).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// start starts cmd as a registered child in its own process group.
func (c *children) start(cmd *exec.Cmd) error {
	cmd.SysProcAttr = childAttr()
	c.mu.Lock()
	defer c.mu.Unlock() // held across Start, so killAll cannot miss a child being born
	if err := cmd.Start(); err != nil {
		return err
	}
	c.pids[cmd.Process.Pid] = struct{}{}
	return nil
}

// done forgets pid once it has been reaped.
func (c *children) done(pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pids, pid)
}

// killAll sends SIGKILL to every registered child's process group.
func (c *children) killAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for pid := range c.pids {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // ESRCH: it has just exited
	}
}

// signalGroup sends sig to the process group pid leads.
func signalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}
