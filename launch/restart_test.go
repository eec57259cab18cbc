package launch

import (
	"bytes"
	"errors"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// failsUntil is a rank program: each rank prints its start (the restart
// count, its rank and the run), and rank 1 fails on the starts before the
// given one (its peer may be stopped before it prints).
func failsUntil(start string) []string {
	return []string{"sh", "-c", `echo "start $CHOREO_RESTART_COUNT $CHOREO_RANK $CHOREO_RUN"; ` +
		`if [ "$CHOREO_RANK" = 1 ] && [ "$CHOREO_RESTART_COUNT" -lt ` + start + ` ]; then exit 3; fi`}
}

var startLine = regexp.MustCompile(`(?m)^start (\d+) (\d+) (\S+)$`)

// starts is, by restart count, the run each rank printed, from the ranks'
// lines ("count rank" keys).
func starts(out string) map[string]string {
	m := map[string]string{}
	for _, l := range startLine.FindAllStringSubmatch(out, -1) {
		m[l[1]+" "+l[2]] = l[3]
	}
	return m
}

// TestRestartsUntilTheRanksSucceed: a launch whose rank 1 fails on its
// first two starts, with three restarts allowed, starts every rank three
// times (counts 0, 1, 2, each start under a run name of its own) and
// succeeds; Restarting hears of restarts 1 and 2, each with the failure.
func TestRestartsUntilTheRanksSucceed(t *testing.T) {
	var out bytes.Buffer // written by one start at a time, through the launch's lock
	var heard []int
	err := Run(Spec{Argv: failsUntil("2"), NProcPerNode: 2, MaxRestarts: 3, Stdout: &out, Stderr: io.Discard,
		Restarting: func(n int, cause error) {
			if !errors.Is(cause, ErrFailed) || !strings.Contains(cause.Error(), "rank 1 exited 3") {
				t.Errorf("restart %d for %v, want rank 1's failure", n, cause)
			}
			heard = append(heard, n)
		}})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !slices.Equal(heard, []int{1, 2}) {
		t.Errorf("Restarting heard %v, want [1 2]", heard)
	}
	s := starts(out.String())
	runs := map[string]bool{}
	for _, c := range []string{"0", "1", "2"} {
		if s[c+" 1"] == "" {
			t.Fatalf("rank 1 did not start at restart count %s\n%s", c, out.String())
		}
		runs[s[c+" 1"]] = true
	}
	if s["2 0"] != s["2 1"] || s["3 1"] != "" || len(runs) != 3 {
		t.Errorf("starts %v: want three, each under a run of its own, the last of both ranks", s)
	}
}

// TestRestartsRunOut is the twin: with one restart allowed the same launch
// starts twice and fails with rank 1's failure of the second start.
func TestRestartsRunOut(t *testing.T) {
	var out bytes.Buffer // written by one start at a time, through the launch's lock
	restarts := 0
	err := Run(Spec{Argv: failsUntil("2"), NProcPerNode: 2, MaxRestarts: 1, Stdout: &out, Stderr: io.Discard,
		Restarting: func(int, error) { restarts++ }})
	var ee *ExitError
	if !errors.Is(err, ErrFailed) || !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(err.Error(), "rank 1 exited 3") {
		t.Fatalf("%v, want rank 1's failure (exit 1)\n%s", err, out.String())
	}
	if s := starts(out.String()); restarts != 1 || s["0 1"] == "" || s["1 1"] == "" || s["0 1"] == s["1 1"] || s["2 1"] != "" {
		t.Errorf("%d restarts, starts %v: want 1 restart, rank 1 started twice under two runs", restarts, s)
	}
}

// TestRestartsStopAtAnInterruption: a signal ends the launch for good.
func TestRestartsStopAtAnInterruption(t *testing.T) {
	sig := make(chan os.Signal, 1)
	started := make(chan struct{}, 4)
	err := Run(Spec{Argv: []string{"sh", "-c", "exec sleep 60"}, NProcPerNode: 2, MaxRestarts: 3, Grace: time.Second,
		Stdout: io.Discard, Stderr: io.Discard, Signals: sig, Started: func([]int) {
			started <- struct{}{}
			sig <- syscall.SIGINT
		}})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("%v, want ErrInterrupted", err)
	}
	if len(started) != 1 {
		t.Errorf("%d starts, want 1", len(started))
	}
}

// TestRestartsChecks: restarts are refused where they cannot work: on
// several nodes, elastic or not.
func TestRestartsChecks(t *testing.T) {
	secret := strings.Repeat("s", 16)
	for _, c := range []struct {
		s    Spec
		want string
	}{
		{Spec{Argv: []string{"x"}, NProcPerNode: 1, MaxRestarts: -1}, "-1 restarts"},
		{Spec{Argv: []string{"x"}, NProcPerNode: 1, MaxRestarts: 1, NNodes: 2, Secret: secret, Coordinator: "127.0.0.1:1"}, "over 2 nodes"},
		{Spec{Argv: []string{"x"}, NProcPerNode: 1, MaxRestarts: 1, Elastic: true, NNodes: 2, Secret: secret, Coordinator: "127.0.0.1:1"}, "over 2 nodes"},
		{Spec{Argv: []string{"x"}, NProcPerNode: 1, MaxRestarts: 1, Elastic: true, Hosts: []string{"a", "b"}}, "elastic launch over SSH"},
	} {
		err := Run(c.s)
		if !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrBadArgument mentioning %q", c.s, err, c.want)
		}
	}
}

// TestRestartsStopAtTheDeadline: the deadline counts from the first
// start: a rank that always fails after 200 ms, with 100 restarts allowed
// and a 1 s deadline, ends the launch after about a second, not 20.
func TestRestartsStopAtTheDeadline(t *testing.T) {
	t0 := time.Now()
	err := Run(Spec{Argv: []string{"sh", "-c", "sleep 0.2; exit 3"}, NProcPerNode: 1, MaxRestarts: 100,
		Deadline: time.Second, Grace: time.Second, Stdout: io.Discard, Stderr: io.Discard})
	if !errors.Is(err, ErrFailed) && !errors.Is(err, ErrTimeout) {
		t.Fatalf("%v, want the rank's failure or the deadline", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("ended after %v, want about the 1 s deadline", d)
	}
}
