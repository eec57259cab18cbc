package test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// demo is the path of the demo built for the tests.
var demo string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "choreo-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	demo = filepath.Join(dir, "demo")
	if prebuilt := os.Getenv("CHOREO_TEST_DEMO"); prebuilt != "" {
		// A demo built elsewhere (a machine without Go runs the tests
		// that need only the demo: TestMatrixOnGPU, say).
		demo, err = filepath.Abs(prebuilt)
	} else {
		args := []string{"build", "-o", demo}
		if raceOn {
			args = append(args, "-race")
		}
		build := exec.Command("go", append(args, "../cmd/demo")...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		err = build.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build demo:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// line is one output line of a rank and when it arrived.
type line struct {
	text string
	at   time.Time
}

// rank is one demo process the test started as a rank, its output kept
// line by line as it comes.
type rank struct {
	r    int
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  []line
	news chan struct{} // signalled on each line and at exit
	done chan struct{} // closed when the process has exited
	err  error         // Wait's, once done
}

// procs is the environment of one run: the hostfile and the secret.
type procs struct {
	t      *testing.T
	n      int
	hosts  []string
	common []string
	ranks  []*rank
}

// newCluster prepares n ranks' environment (ports free a moment ago),
// their data plane transport.
func newCluster(t *testing.T, n int, transport string) *procs {
	t.Helper()
	c := &procs{t: t, n: n}
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.hosts = append(c.hosts, l.Addr().String())
		_ = l.Close()
	}
	b, _ := json.Marshal(c.hosts)
	hf := filepath.Join(t.TempDir(), "hosts.json")
	if err := os.WriteFile(hf, b, 0o600); err != nil {
		t.Fatal(err)
	}
	sec := make([]byte, 16)
	_, _ = rand.Read(sec)
	c.common = []string{"CHOREO_WORLD_SIZE=" + strconv.Itoa(n), "CHOREO_HOSTFILE=" + hf,
		"CHOREO_SECRET=" + hex.EncodeToString(sec), "CHOREO_RUN=test-" + hex.EncodeToString(sec[:4]),
		"CHOREO_TRANSPORT=" + transport}
	t.Cleanup(c.stop)
	return c
}

// start starts rank r as `demo node <args>`.
func (c *procs) start(r int, args ...string) *rank {
	c.t.Helper()
	cmd := exec.Command(demo, append([]string{"node"}, args...)...)
	cmd.Env = append(append(os.Environ(), c.common...), "CHOREO_RANK="+strconv.Itoa(r))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	k := &rank{r: r, cmd: cmd, news: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			k.mu.Lock()
			k.out = append(k.out, line{sc.Text(), time.Now()})
			k.mu.Unlock()
			k.poke()
		}
		k.err = cmd.Wait()
		close(k.done)
		k.poke()
	}()
	c.ranks = append(c.ranks, k)
	return k
}

// startAll starts every rank with args.
func (c *procs) startAll(args ...string) []*rank {
	for r := range c.n {
		c.start(r, args...)
	}
	return c.ranks
}

func (k *rank) poke() {
	select {
	case k.news <- struct{}{}:
	default:
	}
}

// lines returns the output so far.
func (k *rank) lines() []line {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]line(nil), k.out...)
}

// text is the output so far, for messages.
func (k *rank) text() string {
	var b strings.Builder
	for _, l := range k.lines() {
		fmt.Fprintf(&b, "[%d] %s\n", k.r, l.text)
	}
	return b.String()
}

// await waits, up to d or the process's end, for a line starting with
// prefix and returns it.
func (k *rank) await(d time.Duration, prefix string) (line, bool) {
	return k.awaitMatch(d, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// awaitMatch waits, up to d or the process's end, for an output line that
// match accepts, and returns it.
func (k *rank) awaitMatch(d time.Duration, match func(string) bool) (line, bool) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	find := func() (line, bool) {
		for _, l := range k.lines() {
			if match(l.text) {
				return l, true
			}
		}
		return line{}, false
	}
	for {
		if l, ok := find(); ok {
			return l, true
		}
		select {
		case <-k.news:
		case <-k.done:
			return find()
		case <-deadline.C:
			return line{}, false
		}
	}
}

// exited waits up to d for the process to end.
func (k *rank) exited(d time.Duration) bool {
	select {
	case <-k.done:
		return true
	case <-time.After(d):
		return false
	}
}

// exitCode is the process's exit status (-1 for a signal).
func (k *rank) exitCode() int { return k.cmd.ProcessState.ExitCode() }

// stop kills every rank still running (its whole process group) and
// waits for them, so that no process outlives the test.
func (c *procs) stop() {
	for _, k := range c.ranks {
		_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	}
	for _, k := range c.ranks {
		k.exited(10 * time.Second)
	}
}

// transports are the data planes every cluster test runs over
// (CHOREO_TRANSPORT): on one host "auto" picks shm.
var transports = []string{"tcp", "shm"}

// launch runs `demo launch -n n <args>` over transport to its end
// (bounded) and returns its output and error.
func launch(t *testing.T, transport string, n int, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, demo, append([]string{"launch", "-n", strconv.Itoa(n)}, args...)...)
	cmd.Env = append(os.Environ(), "CHOREO_TRANSPORT="+transport)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
