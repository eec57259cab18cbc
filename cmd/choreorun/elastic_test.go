package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/launch"
)

// Variables of the rank program (this test binary, run as a rank by
// TestElasticRankProgram).
const (
	envRankProg = "CHOREORUN_TEST_RANK_PROGRAM" // how the failing rank ends: exit1, kill, early
	envFailRank = "CHOREORUN_TEST_FAIL_RANK"
	envFlagDir  = "CHOREORUN_TEST_DIR"
)

// TestElasticRankProgram is the rank program of the elastic tests, not a
// test of its own: every rank calls launch.Joined (but the failing rank
// in mode "early", which fails at start instead); the failing rank then
// writes its pid to a file and exits 1 (exit1) or kills itself with
// SIGKILL (kill); every other rank waits until that process is gone (reaped by
// the launcher), lingers half a second more and prints "done". A rank
// started again (CHOREO_RESTART_COUNT above 0) calls launch.Joined, prints
// "rejoined" and exits 0.
func TestElasticRankProgram(t *testing.T) {
	mode := os.Getenv(envRankProg)
	if mode == "" {
		t.Skip("the rank program of TestElastic")
	}
	rank, _ := strconv.Atoi(os.Getenv(launch.EnvRank))
	fail, _ := strconv.Atoi(os.Getenv(envFailRank))
	pidFile := filepath.Join(os.Getenv(envFlagDir), "failed.pid")
	if n, _ := strconv.Atoi(os.Getenv(launch.EnvRestartCount)); n > 0 {
		if err := launch.Joined(); err != nil {
			fmt.Println("joined:", err)
			os.Exit(4)
		}
		fmt.Println("rejoined")
		os.Exit(0)
	}
	if rank == fail && mode == "early" {
		_ = os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o600)
		fmt.Println("failing at start")
		os.Exit(1)
	}
	if err := launch.Joined(); err != nil {
		fmt.Println("joined:", err)
		os.Exit(4)
	}
	if rank == fail {
		_ = os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o600)
		fmt.Println("failing after join")
		if mode == "kill" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		os.Exit(1)
	}
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			fmt.Println("the failing rank never went")
			os.Exit(5)
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(string(b))
		if pid > 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			break
		}
	}
	time.Sleep(500 * time.Millisecond)
	fmt.Println("done")
	os.Exit(0)
}

// launchRanks runs choreorun with flags over 3 ranks of the rank program,
// rank 1 failing as mode says; it returns the exit status and the output.
func launchRanks(t *testing.T, mode string, flags ...string) (code int, stdout, stderr string) {
	t.Helper()
	return launchFailing(t, 1, mode, flags...)
}

// launchFailing is launchRanks with rank fail failing.
func launchFailing(t *testing.T, fail int, mode string, flags ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv(envRankProg, mode)
	t.Setenv(envFailRank, strconv.Itoa(fail))
	t.Setenv(envFlagDir, t.TempDir())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"-n", "3", "--tag-output", "--grace", "10s", "--deadline", "2m"}, flags...),
		exe, "-test.run=^TestElasticRankProgram$")
	var out, errw strings.Builder
	code = run(args, strings.NewReader(""), &out, &errw)
	return code, out.String(), errw.String()
}

// A rank that exits 1 or is killed after it joined: with --elastic the
// launch goes on, prints one line for it and exits 0 once the others
// have finished; without, it ends at once as it always did (the others
// stopped, none done).
func TestElastic(t *testing.T) {
	for _, mode := range []string{"exit1", "kill"} {
		t.Run(mode, func(t *testing.T) {
			status := map[string]string{"exit1": "exited 1", "kill": "killed by SIGKILL"}[mode]
			code, out, errw := launchRanks(t, mode, "--elastic")
			lost := regexp.MustCompile(`(?m)^choreorun: lost rank 1: ` + status + ` after [^;]+; 2 ranks go on`)
			if code != 0 || strings.Count(out, "done") != 2 || !lost.MatchString(errw) || strings.Count(errw, "lost rank") != 1 {
				t.Errorf("--elastic: exit %d; want 0, two ranks done and one line for rank 1 %s\nstdout:\n%s\nstderr:\n%s", code, status, out, errw)
			}
			code, out, errw = launchRanks(t, mode)
			first := regexp.MustCompile(`(?m)^choreorun: rank 1 ` + status + ` after .*; 2 others stopped$`)
			if code != 1 || strings.Contains(out, "done") || !first.MatchString(errw) || strings.Contains(errw, "lost rank") {
				t.Errorf("without --elastic: exit %d; want 1 at once, rank 1 named, the others stopped\nstdout:\n%s\nstderr:\n%s", code, out, errw)
			}
		})
	}
}

// A rank that fails before it joined ends an elastic launch as any launch.
func TestElasticFailureAtStart(t *testing.T) {
	code, out, errw := launchRanks(t, "early", "--elastic")
	first := regexp.MustCompile(`(?m)^choreorun: rank 1 exited 1 after .*: failing at start; 2 others stopped$`)
	if code != 1 || strings.Contains(out, "done") || !first.MatchString(errw) || strings.Contains(errw, "lost rank") {
		t.Errorf("exit %d; want 1, rank 1 named, the others stopped\nstdout:\n%s\nstderr:\n%s", code, out, errw)
	}
}

// With --elastic --max-restarts 1, rank 1 killed after it joined is
// started again alone: a line for the loss, one for the restart, the
// replacement rejoins, and the launch exits 0 once every rank is done.
func TestElasticRestart(t *testing.T) {
	code, out, errw := launchRanks(t, "kill", "--elastic", "--max-restarts", "1")
	lines := regexp.MustCompile(`(?m)^choreorun: lost rank 1: killed by SIGKILL after [^;]+; 2 ranks go on\n` +
		`choreorun: restarting rank 1 \(restart 1 of 1; CHOREO_RESTART_COUNT=1\)$`)
	if code != 0 || strings.Count(out, "done") != 2 || !strings.Contains(out, "[1] rejoined") || !lines.MatchString(errw) ||
		strings.Count(errw, "restarting") != 1 {
		t.Errorf("exit %d; want 0, two ranks done, rank 1 rejoined, a line for its loss and one for its restart\nstdout:\n%s\nstderr:\n%s", code, out, errw)
	}
}

// Rank 0, lost, is not restarted, and a line says why; the others go on.
func TestElasticRestartNotOfRankZero(t *testing.T) {
	code, out, errw := launchFailing(t, 0, "exit1", "--elastic", "--max-restarts", "2")
	lines := regexp.MustCompile(`(?m)^choreorun: lost rank 0: exited 1 after [^;]+; 2 ranks go on: failing after join\n` +
		`choreorun: rank 0 is not restarted: rank 0 hosts the group's rendezvous`)
	if code != 0 || strings.Count(out, "done") != 2 || strings.Contains(out, "rejoined") || !lines.MatchString(errw) ||
		strings.Contains(errw, "restarting") {
		t.Errorf("exit %d; want 0, two ranks done, rank 0 lost and not restarted\nstdout:\n%s\nstderr:\n%s", code, out, errw)
	}
}

// --elastic is a flag of one host's launch, with --max-restarts or not;
// with --hosts or several nodes it is refused.
func TestParseElastic(t *testing.T) {
	s, err := parse([]string{"--elastic", "-n", "4", "./prog"})
	if err != nil || !s.Elastic || s.NProcPerNode != 4 {
		t.Errorf("--elastic -n 4: %+v, %v", s, err)
	}
	if s, err := parse([]string{"-n", "4", "./prog", "--elastic"}); err != nil || s.Elastic || strings.Join(s.Argv, " ") != "./prog --elastic" {
		t.Errorf("the program's own --elastic: elastic %v, argv %q, %v", s.Elastic, s.Argv, err)
	}
	if s, err := parse([]string{"--elastic", "--max-restarts", "3", "-n", "4", "./prog"}); err != nil || !s.Elastic || s.MaxRestarts != 3 {
		t.Errorf("--elastic --max-restarts 3: elastic %v, %d restarts, %v", s.Elastic, s.MaxRestarts, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--elastic", "-n", "4", "--hosts", "a,b", "./prog"}, "--elastic with --hosts"},
		{[]string{"--elastic", "--max-restarts", "1", "-n", "4", "--hosts", "a,b", "./prog"}, "--elastic with --hosts"},
		{[]string{"--elastic", "--max-restarts", "1", "--nproc-per-node", "2", "--nnodes", "2", "--coordinator", "h:1", "./prog"}, "several hosts"},
	} {
		var out, errw strings.Builder
		code := run(c.args, strings.NewReader(""), &out, &errw)
		if code != 2 || !strings.Contains(errw.String(), c.want) {
			t.Errorf("%q: exit %d, %q; want 2 and the reason (%s)", c.args, code, errw.String(), c.want)
		}
	}
}
