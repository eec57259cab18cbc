package launch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Variables of the rank program (this test binary, run as a rank by
// TestRankProgram).
const (
	envPlan = "LAUNCH_TEST_PLAN" // each start's steps: "RANK/RESTART=step,step ..." and "*=step,..." for the others
	envDir  = "LAUNCH_TEST_DIR"  // where wait: and touch: find their files
)

// TestRankProgram is the rank program of the rank-restart tests, not a
// test of its own. Each start prints "start RESTART RANK", then runs the
// steps the plan gives its rank and restart count (else those of "*"):
// join (Joined), kill (SIGKILL to itself), exitN, wait:NAME (until the
// file NAME exists in the test's directory, at most a minute),
// touch:NAME; it exits 0 after the last.
func TestRankProgram(t *testing.T) {
	plan := os.Getenv(envPlan)
	if plan == "" {
		t.Skip("the rank program of the rank-restart tests")
	}
	rank, restart := os.Getenv(EnvRank), os.Getenv(EnvRestartCount)
	fmt.Printf("start %s %s\n", restart, rank)
	steps := ""
	for _, p := range strings.Fields(plan) {
		who, what, _ := strings.Cut(p, "=")
		if who == rank+"/"+restart || who == "*" && steps == "" {
			steps = what
		}
	}
	dir := os.Getenv(envDir)
	for _, step := range strings.Split(steps, ",") {
		name, arg, _ := strings.Cut(step, ":")
		switch {
		case name == "join":
			if err := Joined(); err != nil {
				fmt.Println("joined:", err)
				os.Exit(4)
			}
		case name == "kill":
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute)
		case strings.HasPrefix(name, "exit"):
			code, _ := strconv.Atoi(strings.TrimPrefix(name, "exit"))
			fmt.Println("exiting", code)
			os.Exit(code)
		case name == "wait":
			for end := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(dir, arg)); err == nil {
					break
				}
				if time.Now().After(end) {
					fmt.Println("no", arg, "within a minute")
					os.Exit(5)
				}
			}
		case name == "touch":
			if err := os.WriteFile(filepath.Join(dir, arg), nil, 0o600); err != nil {
				fmt.Println(err)
				os.Exit(6)
			}
		}
	}
	os.Exit(0)
}

// heard is what a launch's hooks heard.
type heard struct {
	mu       sync.Mutex
	lost     []Loss
	restarts []RankRestart
}

// planned runs n ranks of the rank program under plan, elastic, with
// restarts allowed, and Spec changed as more says. Its Lost hook creates the file "lost-RANK-RESTART" in
// the plan's directory for each loss (for ranks that wait for one). It
// returns the ranks' output, what the hooks heard and Run's error.
func planned(t *testing.T, n, restarts int, plan string, more ...func(*Spec)) (string, *heard, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	h := &heard{}
	var out bytes.Buffer // written through the launch's line lock; read after Run
	s := Spec{Argv: []string{exe, "-test.run=^TestRankProgram$"}, NProcPerNode: n, Elastic: true, MaxRestarts: restarts,
		Env: []string{envPlan + "=" + plan, envDir + "=" + dir}, Grace: 10 * time.Second, Deadline: 2 * time.Minute,
		Stdout: &out, Stderr: io.Discard,
		Lost: func(l Loss) {
			h.mu.Lock()
			h.lost = append(h.lost, l)
			h.mu.Unlock()
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("lost-%d-%d", l.Rank, l.Restart)), nil, 0o600); err != nil {
				t.Error(err)
			}
		},
		RankRestarting: func(r RankRestart) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.restarts = append(h.restarts, r)
		}}
	for _, f := range more {
		f(&s)
	}
	err = Run(s)
	return out.String(), h, err
}

var startPrinted = regexp.MustCompile(`(?m)^start (\d+) (\d+)$`)

// startsOf is each start the ranks printed, "RESTART RANK", and how many
// times.
func startsOf(out string) map[string]int {
	m := map[string]int{}
	for _, l := range startPrinted.FindAllStringSubmatch(out, -1) {
		m[l[1]+" "+l[2]]++
	}
	return m
}

// TestRankRestart: rank 1, killed after it joined, is started again once,
// alone, with CHOREO_RESTART_COUNT=1; its replacement joins and the launch
// succeeds when every rank ends 0. Lost hears of the loss, then
// RankRestarting of the restart.
func TestRankRestart(t *testing.T) {
	out, h, err := planned(t, 3, 1, "1/0=join,kill 1/1=join,touch:rejoined *=join,wait:rejoined")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if s := startsOf(out); s["0 0"] != 1 || s["0 1"] != 1 || s["0 2"] != 1 || s["1 1"] != 1 || len(s) != 4 {
		t.Errorf("starts %v: want each rank once and rank 1 restarted once, with count 1\n%s", s, out)
	}
	if len(h.lost) != 1 || h.lost[0].Rank != 1 || h.lost[0].Restart != 0 || h.lost[0].Status != "killed by SIGKILL" ||
		h.lost[0].NoRestart != "" || h.lost[0].Running != 2 {
		t.Errorf("lost %+v: want rank 1 killed, to be restarted, 2 running", h.lost)
	}
	want := RankRestart{Rank: 1, Count: 1, N: 1, Max: 1}
	if len(h.restarts) != 1 || h.restarts[0].Rank != want.Rank || h.restarts[0].Count != 1 || h.restarts[0].N != 1 ||
		h.restarts[0].Max != 1 || h.restarts[0].Cause.Status != "killed by SIGKILL" {
		t.Errorf("restarts %+v, want %+v for the loss", h.restarts, want)
	}
	if len(h.restarts) == 1 && h.restarts[0].String() != "restarting rank 1 (restart 1 of 1; CHOREO_RESTART_COUNT=1)" {
		t.Errorf("restart line %q", h.restarts[0])
	}
}

// TestRankRestartsRunOut: with one restart, rank 1 lost a second time is
// not started again (Lost says why) and the others go on to succeed.
func TestRankRestartsRunOut(t *testing.T) {
	out, h, err := planned(t, 3, 1, "1/0=join,kill 1/1=join,exit3 *=join,wait:lost-1-1")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if s := startsOf(out); s["1 1"] != 1 || s["2 1"] != 0 || len(s) != 4 {
		t.Errorf("starts %v: want rank 1 restarted once only\n%s", s, out)
	}
	if len(h.lost) != 2 || h.lost[1].Rank != 1 || h.lost[1].Restart != 1 || !h.lost[1].Joined || h.lost[1].Code != 3 ||
		!strings.Contains(h.lost[1].NoRestart, "restarts are used") || len(h.restarts) != 1 {
		t.Fatalf("lost %+v, restarts %+v: want rank 1 lost twice, restarted once", h.lost, h.restarts)
	}
	if l := h.lost[1].String(); !strings.HasPrefix(l, "lost rank 1 (restart 1): exited 3 after ") || !strings.HasSuffix(l, "; 2 ranks go on: exiting 3") {
		t.Errorf("second loss %q", l)
	}
}

// TestRankRestartBeforeItRejoined: a replacement that fails before it
// joined is lost as any, the others go on, and it is restarted again; the
// third start of rank 1 rejoins and the launch succeeds.
func TestRankRestartBeforeItRejoined(t *testing.T) {
	out, h, err := planned(t, 3, 2, "1/0=join,exit1 1/1=exit7 1/2=join,touch:rejoined *=join,wait:rejoined")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if s := startsOf(out); s["0 1"] != 1 || s["1 1"] != 1 || s["2 1"] != 1 || len(s) != 5 {
		t.Errorf("starts %v: want rank 1 started three times\n%s", s, out)
	}
	if len(h.lost) != 2 || h.lost[1].Restart != 1 || h.lost[1].Joined || h.lost[1].Code != 7 || len(h.restarts) != 2 ||
		h.restarts[1].Count != 2 || h.restarts[1].N != 2 {
		t.Fatalf("lost %+v, restarts %+v: want the first replacement lost before it rejoined, then restarted", h.lost, h.restarts)
	}
	if l := h.lost[1].String(); !strings.HasPrefix(l, "lost rank 1 (restart 1, before it rejoined): exited 7 after ") {
		t.Errorf("second loss %q", l)
	}
}

// TestRankRestartFailureAtFirstStart is the twin: with restarts left, a
// rank that fails in its first start before it joined still stops the
// launch, and nothing is restarted.
func TestRankRestartFailureAtFirstStart(t *testing.T) {
	out, h, err := planned(t, 3, 2, "1/0=exit3 *=join,wait:never")
	if !errors.Is(err, ErrFailed) || !strings.HasPrefix(err.Error(), "rank 1 exited 3 after ") || !strings.HasSuffix(err.Error(), "; 2 others stopped") {
		t.Fatalf("%v: want rank 1's failure, the others stopped\n%s", err, out)
	}
	s := startsOf(out) // the others may be stopped before they print their start
	for k := range s {
		if !strings.HasPrefix(k, "0 ") {
			t.Errorf("a restart printed its start: %q", k)
		}
	}
	if s["0 1"] != 1 || len(h.lost) != 0 || len(h.restarts) != 0 {
		t.Errorf("starts %v, lost %+v, restarts %+v: want rank 1 started once, nothing lost or restarted", s, h.lost, h.restarts)
	}
}

// TestRankRestartNotOfRankZero: rank 0, which hosts the rendezvous, is
// not restarted, nor rank 1 lost after it (Lost says why), and rank 2
// goes on to succeed.
func TestRankRestartNotOfRankZero(t *testing.T) {
	out, h, err := planned(t, 3, 2, "0/0=join,kill 1/0=join,wait:lost-0-0,exit2 2/0=join,wait:lost-1-0")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if s := startsOf(out); s["0 0"] != 1 || len(s) != 3 || len(h.restarts) != 0 {
		t.Errorf("starts %v, restarts %+v: want each rank started once", s, h.restarts)
	}
	if len(h.lost) != 2 || h.lost[0].Rank != 0 || !strings.HasPrefix(h.lost[0].NoRestart, "rank 0 hosts the group's rendezvous") ||
		h.lost[1].Rank != 1 || !strings.HasPrefix(h.lost[1].NoRestart, "rank 0, which hosts the group's rendezvous, was lost") {
		t.Errorf("lost %+v: want rank 0 then rank 1, neither restarted for rank 0's rendezvous", h.lost)
	}
}

// TestRankRestartNotOfTheLast: a rank lost when no other runs is not
// restarted: the launch ends, every rank lost.
func TestRankRestartNotOfTheLast(t *testing.T) {
	out, h, err := planned(t, 2, 3, "0/0=join,exit1 1/0=join,wait:lost-0-0,kill")
	// rank 0 is lost first, so that rank 1 is the last to run
	if !errors.Is(err, ErrFailed) || !strings.HasPrefix(err.Error(), "every rank was lost, none succeeded; the last: rank 1 killed by SIGKILL") {
		t.Fatalf("%v: want every rank lost\n%s", err, out)
	}
	if len(h.lost) != 2 || h.lost[1].NoRestart != "no other rank is running" || len(h.restarts) != 0 {
		t.Errorf("lost %+v, restarts %+v: want rank 1 not restarted", h.lost, h.restarts)
	}
}

// TestRankRestartLogDir: a replacement writes on in its rank's log file.
func TestRankRestartLogDir(t *testing.T) {
	logs := t.TempDir()
	_, h, err := planned(t, 2, 1, "1/0=join,exit1 1/1=join,touch:rejoined *=join,wait:rejoined",
		func(s *Spec) { s.LogDir = logs })
	if err != nil || len(h.restarts) != 1 {
		t.Fatalf("%v, restarts %+v: want success after one restart", err, h.restarts)
	}
	b, err := os.ReadFile(filepath.Join(logs, "rank-1.log"))
	if err != nil {
		t.Fatal(err)
	}
	if s := startsOf(string(b)); s["0 1"] != 1 || s["1 1"] != 1 || len(s) != 2 {
		t.Errorf("rank 1's log has starts %v, want its first and its restart:\n%s", s, b)
	}
}
