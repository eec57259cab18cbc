package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// End to end: the test binary as the demo launches ranks that are the test
// binary as the demo (`demo node ...`), joined over loopback.

// waitDemo waits for a demoCmd and returns its exit status.
func waitDemo(t *testing.T, wait func() error) int {
	t.Helper()
	err := wait()
	var xe interface{ ExitCode() int }
	if errors.As(err, &xe) {
		return xe.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// checkPrefixed fails t unless every line of out is led by "[rank] ".
func checkPrefixed(t *testing.T, out string, n int) {
	t.Helper()
	lead := regexp.MustCompile(`^\[(\d+)\] `)
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		m := lead.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("line %q is not led by a rank", l)
		} else if r, _ := strconv.Atoi(m[1]); r >= n {
			t.Errorf("line %q: no rank %d in %d", l, r, n)
		}
	}
}

func TestLaunchRunEndToEnd(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			cmd, stdout, stderr := demoCmd(t, 2*time.Minute, "launch", "-n", strconv.Itoa(n),
				"run", "--steps", "3", "--size", "64KiB", "--backend", "sim")
			if code := waitDemo(t, cmd.Wait); code != 0 {
				t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			out := stdout.String()
			checkPrefixed(t, out, n)
			for _, want := range []string{
				fmt.Sprintf("[0] choreo demo: %d ranks, one process each, on ", n),
				"fill+allreduce(sum)      3",
				fmt.Sprintf("[0] checks passed: %d/%d (every rank's)\n", 6*n, 6*n),
			} {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func TestLaunchBenchEndToEnd(t *testing.T) {
	cmd, stdout, stderr := demoCmd(t, 3*time.Minute, "launch", "-n", "2", "bench", "--backend", "sim",
		"--ops", "allreduce,allgather,sendrecv", "--min-size", "4KiB", "--max-size", "16KiB", "--iters", "5")
	if code := waitDemo(t, cmd.Wait); code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	out := stdout.String()
	checkPrefixed(t, out, 2)
	rows := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(strings.TrimPrefix(l, "[0] "))
		if len(f) == 10 && (f[0] == "allreduce" || f[0] == "allgather" || f[0] == "sendrecv") {
			rows[f[0]]++
			if f[9] != "0" {
				t.Errorf("row %q: wrong elements", l)
			}
		}
	}
	for _, op := range []string{"allreduce", "allgather", "sendrecv"} {
		if rows[op] != 2 {
			t.Errorf("%d rows of %s, want 2 (4 KiB, 16 KiB):\n%s", rows[op], op, out)
		}
	}
	if !strings.Contains(out, "[0] 2 ranks (processes), 1-element float32 all-reduce, end to end: p50 ") {
		t.Errorf("no latency line:\n%s", out)
	}
}

// rankPid finds the process that is rank of the launcher parent, by its
// parent and its CHOREO_RANK.
func rankPid(parent, rank int) (int, bool) {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == "CHOREO_RANK="+strconv.Itoa(rank) {
				return pid, true
			}
		}
	}
	return 0, false
}

func TestLaunchNamesAKilledRank(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	cmd, stdout, stderr := demoCmd(t, 2*time.Minute, "launch", "-n", "3", "--grace", "2s",
		"run", "--steps", "1000000", "--size", "4KiB", "--backend", "sim", "--timeout", "20s")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(stdout.String(), "[0] choreo demo:") { // joined
		if time.Now().After(deadline) {
			t.Fatalf("the ranks did not join\nstderr:\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	pid, ok := rankPid(cmd.Process.Pid, 1)
	if !ok {
		t.Fatal("rank 1's process not found")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if code := waitDemo(t, cmd.Wait); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("the launcher took %v to end after a rank died", d)
	}
	if want := "demo: launch: rank 1 killed by SIGKILL after "; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}
