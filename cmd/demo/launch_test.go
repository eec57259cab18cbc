package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives"
	choreolaunch "github.com/choreo-gpu/choreo/launch"
)

// fakeLaunch launches n fake ranks of mode in this process and returns
// their output, the launch's error and the ranks' pids.
func fakeLaunch(t *testing.T, n int, mode string, sp launchSpec) (stdout, stderr string, pids []int, err error) {
	t.Helper()
	exe, xerr := os.Executable()
	if xerr != nil {
		t.Fatal(xerr)
	}
	out, errw := &syncBuffer{}, &syncBuffer{}
	sp.n, sp.exe, sp.stdout, sp.stderr = n, exe, out, errw
	sp.env = append(sp.env, envFakeRank+"="+mode)
	if sp.deadline == 0 {
		sp.deadline = time.Minute // the test's bound, should all else fail
	}
	if sp.sigs == nil {
		sp.sigs = make(chan os.Signal) // the test process's own signals stay its own
	}
	started := sp.started
	sp.started = func(p []int) {
		pids = p
		if started != nil {
			started(p)
		}
	}
	err = launch(sp)
	return out.String(), errw.String(), pids, err
}

func TestLaunchPrefixesWholeLines(t *testing.T) {
	stdout, stderr, pids, err := fakeLaunch(t, 3, "lines", launchSpec{})
	if err != nil {
		t.Fatalf("launch: %v\nstderr:\n%s", err, stderr)
	}
	line := regexp.MustCompile(`^\[(\d)\] (pid \d+|rank (\d) line \d+ x{200}|part-two|no newline at the end)$`)
	count := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil || (m[3] != "" && m[3] != m[1]) {
			t.Fatalf("stdout line %q is not one rank's whole line", l)
		}
		count[m[1]]++
	}
	for r := range 3 {
		if got := count[strconv.Itoa(r)]; got != 203 {
			t.Errorf("rank %d: %d lines on stdout, want 203", r, got)
		}
		if !strings.Contains(stderr, fmt.Sprintf("[%d] rank %d to stderr\n", r, r)) {
			t.Errorf("stderr lacks rank %d's line:\n%s", r, stderr)
		}
	}
	waitGone(t, pids, time.Second)
}

// Each rank gets CHOREO_LOCAL_RANK, its rank, over a value the launcher
// itself inherited.
func TestLaunchSetsEachRanksLocalRank(t *testing.T) {
	t.Setenv(collectives.EnvLocalRank, "7")
	stdout, stderr, pids, err := fakeLaunch(t, 3, "localrank", launchSpec{})
	if err != nil {
		t.Fatalf("launch: %v\nstderr:\n%s", err, stderr)
	}
	for r := range 3 {
		if want := fmt.Sprintf("[%d] local rank %d true\n", r, r); !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	waitGone(t, pids, time.Second)
}

func TestLaunchStopsTheOthersAndNamesTheFailedRank(t *testing.T) {
	t0 := time.Now()
	_, stderr, pids, err := fakeLaunch(t, 4, "sleep", launchSpec{env: []string{envFailRank + "=2"}, grace: time.Second})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code == 0 {
		t.Fatalf("launch: %v, want an exit error", err)
	}
	if want := regexp.MustCompile(`^launch: rank 2 exited 7 after [0-9.]+m?s: failing on purpose; 3 others stopped$`); !want.MatchString(err.Error()) {
		t.Errorf("error %q does not match %v", err, want)
	}
	if !strings.Contains(stderr, "[2] failing on purpose\n") {
		t.Errorf("stderr lacks the failed rank's line:\n%s", stderr)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("launch took %v after one rank failed", d)
	}
	waitGone(t, pids, time.Second)
}

func TestLaunchKillsARankThatIgnoresSIGTERM(t *testing.T) {
	t0 := time.Now()
	_, _, pids, err := fakeLaunch(t, 3, "stubborn", launchSpec{env: []string{envFailRank + "=1"}, grace: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "rank 1 exited 7 after") || !strings.HasSuffix(err.Error(), "; 2 others stopped") {
		t.Fatalf("launch: %v", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("launch took %v", d)
	}
	waitGone(t, pids, time.Second)
}

func TestLaunchNamesTheRankThatFailedFirstNotTheOneThatLostAPeer(t *testing.T) {
	_, _, pids, err := fakeLaunch(t, 3, "peerlost", launchSpec{grace: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "rank 2 exited 7 after") ||
		!strings.Contains(err.Error(), "; 1 more failed; 1 other stopped") {
		t.Fatalf("launch: %v", err)
	}
	waitGone(t, pids, time.Second)
}

func TestLaunchStopsEveryRankOnASignal(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	t0 := time.Now()
	_, _, pids, err := fakeLaunch(t, 3, "sleep", launchSpec{sigs: sigs, started: func([]int) {
		time.AfterFunc(200*time.Millisecond, func() { sigs <- syscall.SIGINT })
	}})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 130 || !strings.Contains(err.Error(), "interrupted (interrupt); 3 ranks stopped") {
		t.Fatalf("launch: %v", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("launch took %v", d)
	}
	waitGone(t, pids, time.Second)
}

func TestLaunchDeadline(t *testing.T) {
	_, _, pids, err := fakeLaunch(t, 2, "sleep", launchSpec{deadline: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "deadline 300ms passed; 2 ranks stopped") {
		t.Fatalf("launch: %v", err)
	}
	waitGone(t, pids, time.Second)
}

// launcherPids starts a launcher of 3 fake sleeping ranks (the test binary)
// and returns it with its ranks' pids, once each has said so through it
// (then they only sleep: a write to the dead launcher's pipe would end
// them with SIGPIPE, which is not what the tests look for).
func launcherPids(t *testing.T) (*os.Process, []int, func() error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := execCommand(exe, envFakeLauncher+"=sleep")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var pids []int
	said := 0
	timeout := time.After(30 * time.Second)
	for len(pids) == 0 || said < len(pids) {
		select {
		case l := <-lines:
			if strings.HasPrefix(l, "pids ") {
				for _, f := range strings.Fields(strings.TrimPrefix(l, "pids ")) {
					p, _ := strconv.Atoi(f)
					pids = append(pids, p)
				}
			} else if strings.Contains(l, "] pid ") {
				said++
			}
		case <-timeout:
			t.Fatalf("the launcher did not start its ranks (pids %v, %d said so)", pids, said)
		}
	}
	go func() {
		for range lines { // the ranks' lines
		}
	}()
	return cmd.Process, pids, cmd.Wait
}

func TestLauncherOnCtrlCLeavesNoRank(t *testing.T) {
	launcher, pids, wait := launcherPids(t)
	if len(pids) != 3 {
		t.Fatalf("pids %v", pids)
	}
	if err := launcher.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		var xe interface{ ExitCode() int }
		if !errors.As(err, &xe) || xe.ExitCode() != 130 {
			t.Errorf("launcher: %v, want exit status 130", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the launcher did not exit within 15 s of SIGINT")
	}
	waitGone(t, pids, time.Second)
}

func TestLauncherKilledLeavesNoRank(t *testing.T) {
	if !choreolaunch.DiesWithLauncher {
		t.Skip("only Linux kills a dead launcher's ranks")
	}
	launcher, pids, wait := launcherPids(t)
	if err := launcher.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = wait()
	waitGone(t, pids, 5*time.Second)
}

func TestCheckArgsRefusesABadRankCommandLine(t *testing.T) {
	var help strings.Builder
	if helped, err := checkArgs([]string{"node", "run", "--steps=3"}, &help); err != nil || helped {
		t.Errorf("good command line: helped %v, error %v", helped, err)
	}
	if _, err := checkArgs([]string{"node", "run", "--no-such-flag"}, &help); err == nil {
		t.Error("bad flag accepted")
	}
	if _, err := checkArgs([]string{"node", "frobnicate"}, &help); err == nil {
		t.Error("bad subcommand accepted")
	}
	if help.Len() > 0 {
		t.Errorf("help written unasked: %q", help.String())
	}
	if helped, _ := checkArgs([]string{"node", "bench", "--help"}, &help); !helped || !strings.Contains(help.String(), "Usage: demo node bench") {
		t.Errorf("--help: helped %v, help %q", helped, help.String())
	}
}
