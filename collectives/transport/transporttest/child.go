package transporttest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Child is a rank's process for a transport package's process tests:
// this test binary run again, running one test function that does the
// child's part. Its output lines are collected; its standard input is
// the parent's to write lines to (Say); it is killed when the test ends.
type Child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu   sync.Mutex
	out  []string
	seen *sync.Cond
	done bool
}

// StartChild runs this test binary's test function test in a process of
// its own, with env ("NAME=value") added to this process's environment.
func StartChild(t *testing.T, test string, env ...string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{cmd: cmd, stdin: in}
	c.seen = sync.NewCond(&c.mu)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.mu.Lock()
			c.out = append(c.out, sc.Text())
			c.seen.Broadcast()
			c.mu.Unlock()
		}
		_ = cmd.Wait()
		c.mu.Lock()
		c.done = true
		c.seen.Broadcast()
		c.mu.Unlock()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once it runs
		_ = cmd.Process.Kill()
		c.Wait(10 * time.Second)
	})
	return c
}

// Line waits up to d for a line that starts with prefix and returns the
// first such line (false: none came, or the process ended first).
func (c *Child) Line(prefix string, d time.Duration) (string, bool) {
	var line string
	found := c.waitUntil(d, func() bool {
		for _, l := range c.out {
			if strings.HasPrefix(l, prefix) {
				line = l
				return true
			}
		}
		return false
	})
	return line, found
}

// Wait waits up to d for the process to end and reports whether it did.
func (c *Child) Wait(d time.Duration) bool {
	return c.waitUntil(d, func() bool { return c.done })
}

// waitUntil waits up to d, or until the process has ended, for cond
// (called with c.mu held, after each new line) to hold, and reports
// whether it held.
func (c *Child) waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	stop := time.AfterFunc(d, func() {
		c.mu.Lock()
		c.seen.Broadcast()
		c.mu.Unlock()
	})
	defer stop.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if cond() {
			return true
		}
		if c.done || !time.Now().Before(deadline) {
			return false
		}
		c.seen.Wait()
	}
}

// Output is what the process printed so far.
func (c *Child) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.out, "\n")
}

// Success reports whether the process ended with status 0.
func (c *Child) Success() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done && c.cmd.ProcessState != nil && c.cmd.ProcessState.Success()
}

// Say writes line to the process's standard input.
func (c *Child) Say(line string) error {
	_, err := fmt.Fprintln(c.stdin, line)
	return err
}

// Signal sends the process sig.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// stdin is this process's standard input, for Heard.
var stdin = sync.OnceValue(func() *bufio.Reader { return bufio.NewReader(os.Stdin) })

// Heard waits up to d for a line from the parent on standard input (a
// Child's part reads what its parent Says). A line that comes later is
// lost.
func Heard(d time.Duration) (string, error) {
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := stdin().ReadString('\n')
		ch <- result{strings.TrimSpace(line), err}
	}()
	select {
	case r := <-ch:
		return r.line, r.err
	case <-time.After(d):
		return "", fmt.Errorf("no line from the parent within %v", d)
	}
}
