package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/cluster"
)

// The test binary plays other programs, chosen by these variables: a fake
// rank (no runtime: it only behaves as a process), a launcher of fake
// ranks, or the demo itself.
const (
	envFakeRank     = "DEMO_TEST_RANK"     // fake rank: its behaviour
	envFailRank     = "DEMO_TEST_FAIL"     // fake rank: the rank that fails
	envFakeLauncher = "DEMO_TEST_LAUNCHER" // launcher of 3 fake ranks of that behaviour
	envDemo         = "DEMO_TEST_MAIN"     // the demo's main
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envFakeRank) != "":
		os.Exit(fakeRank(os.Getenv(envFakeRank)))
	case os.Getenv(envFakeLauncher) != "":
		os.Exit(fakeLauncher(os.Getenv(envFakeLauncher)))
	case os.Getenv(envDemo) != "":
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeRank checks the launcher's variables, prints its pid and then does
// what mode says; it returns its exit status.
func fakeRank(mode string) int {
	rank, _ := strconv.Atoi(os.Getenv(cluster.EnvRank))
	if err := checkLaunchEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "fake rank:", err)
		return 9
	}
	fmt.Printf("pid %d\n", os.Getpid())
	failing := os.Getenv(envFailRank) == strconv.Itoa(rank)
	switch mode {
	case "lines":
		for i := range 200 {
			fmt.Printf("rank %d line %d %s\n", rank, i, strings.Repeat("x", 200))
		}
		_, _ = os.Stdout.WriteString("part-")
		time.Sleep(20 * time.Millisecond)
		_, _ = os.Stdout.WriteString("two\n")
		fmt.Fprintf(os.Stderr, "rank %d to stderr\n", rank)
		_, _ = os.Stdout.WriteString("no newline at the end")
		return 0
	case "localrank": // says its local rank
		lr, ok := collectives.LocalRank()
		fmt.Printf("local rank %d %v\n", lr, ok)
		return 0
	case "stubborn": // SIGTERM does not stop it
		signal.Ignore(syscall.SIGTERM)
	case "peerlost-stubborn": // rank 0 reports a lost peer (saying when); the others ignore SIGTERM
		if rank == 0 {
			time.Sleep(50 * time.Millisecond)
			fmt.Printf("failing at %d\n", time.Now().UnixNano())
			return exitPeerLost
		}
		signal.Ignore(syscall.SIGTERM)
	case "peerlost": // rank 0 reports a lost peer before rank 2 fails
		if rank == 0 {
			time.Sleep(50 * time.Millisecond)
			return exitPeerLost
		}
		failing = rank == 2
	}
	if failing {
		time.Sleep(200 * time.Millisecond)
		fmt.Fprintln(os.Stderr, "failing on purpose")
		return 7
	}
	time.Sleep(30 * time.Second) // longer than any test waits
	return 0
}

// checkLaunchEnv checks what launch gives every rank.
func checkLaunchEnv() error {
	n, err := strconv.Atoi(os.Getenv(cluster.EnvWorldSize))
	if err != nil {
		return err
	}
	if lr, rank := os.Getenv(collectives.EnvLocalRank), os.Getenv(cluster.EnvRank); lr != rank {
		return fmt.Errorf("%s=%q, want the rank, %q", collectives.EnvLocalRank, lr, rank)
	}
	if lr, ok := collectives.LocalRank(); !ok || strconv.Itoa(lr) != os.Getenv(cluster.EnvRank) {
		return fmt.Errorf("collectives.LocalRank() = %d, %v; want the rank", lr, ok)
	}
	switch coord := os.Getenv(cluster.EnvCoordinator); {
	case n < 1:
		return fmt.Errorf("world size %d", n)
	case !strings.HasPrefix(coord, "127.0.0.1:"):
		return fmt.Errorf("coordinator %q, want 127.0.0.1:port", coord)
	case os.Getenv(cluster.EnvHostfile) != "":
		return fmt.Errorf("a hostfile is set")
	case len(os.Getenv(cluster.EnvSecret)) < 16:
		return fmt.Errorf("secret too short")
	case os.Getenv(cluster.EnvRun) == "":
		return fmt.Errorf("no run id")
	}
	return nil
}

// fakeLauncher launches 3 fake ranks of mode, prints their pids, and exits
// as the demo would.
func fakeLauncher(mode string) int {
	exe, _ := os.Executable()
	err := launch(launchSpec{n: 3, exe: exe, env: []string{envFakeRank + "=" + mode},
		stdout: os.Stdout, stderr: os.Stderr, grace: 500 * time.Millisecond, deadline: time.Minute,
		started: func(pids []int) { fmt.Printf("pids %s\n", strings.Trim(fmt.Sprint(pids), "[]")) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return exitCode(err)
	}
	return 0
}

// syncBuffer is a bytes.Buffer safe for the launcher's writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: signal 0 is all there is
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitGone fails t unless every pid is gone within d.
func waitGone(t *testing.T, pids []int, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(end) {
				t.Fatalf("process %d still alive %v later", p, d)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// demoCmd is the test binary as the demo with args, bounded by d.
func demoCmd(t *testing.T, d time.Duration, args ...string) (*exec.Cmd, *syncBuffer, *syncBuffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), envDemo+"=1")
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(d, func() { _ = cmd.Process.Signal(syscall.SIGINT) })
	t.Cleanup(func() {
		timer.Stop()
		_ = cmd.Process.Kill()
	})
	return cmd, stdout, stderr
}

// execCommand is the test binary with extra variables.
func execCommand(exe string, env ...string) *exec.Cmd {
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return cmd
}
