package launch

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// exitOf runs sh -c script and is its exit, started d ago.
func exitOf(t *testing.T, id int, script string, d time.Duration) exit {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	err := cmd.Run()
	return exit{m: &member{id: id, started: time.Now().Add(-d)}, state: cmd.ProcessState, err: err, at: time.Now()}
}

// A loss is one bounded line with the rank (and which restart of it),
// how it ended and how many go on; a launch whose every rank was lost
// fails, naming the last.
func TestLossLine(t *testing.T) {
	killed := exitOf(t, 2, "kill -9 $$", 3100*time.Millisecond)
	if l := lossOf(killed, 3, "its last words").String(); l != "lost rank 2: killed by SIGKILL after 3.1s; 3 ranks go on" {
		t.Errorf("killed: %q", l)
	}
	exited := exitOf(t, 7, "exit 1", 420*time.Millisecond)
	l := lossOf(exited, 1, strings.Repeat("x", 400))
	if s := l.String(); len(s) > MaxSummary || !strings.HasPrefix(s, "lost rank 7: exited 1 after 42") ||
		!strings.Contains(s, "; 1 rank goes on: xxx") || !strings.HasSuffix(s, "...") || l.Code != 1 || l.Signal != 0 {
		t.Errorf("exited: %q (%d bytes), %+v", s, len(s), l)
	}
	again := Loss{Rank: 2, Restart: 1, Joined: true, Code: -1, Signal: 9, Status: "killed by SIGKILL", After: 1200 * time.Millisecond, Running: 2}
	if s := again.String(); s != "lost rank 2 (restart 1): killed by SIGKILL after 1.2s; 2 ranks go on" {
		t.Errorf("a restarted rank lost again: %q", s)
	}
	again.Joined = false
	if s := again.String(); s != "lost rank 2 (restart 1, before it rejoined): killed by SIGKILL after 1.2s; 2 ranks go on" {
		t.Errorf("a restarted rank lost before it rejoined: %q", s)
	}
	unstarted := Loss{Rank: 3, Restart: 2, Code: -1, Status: "not started: no such file", Running: 1}
	if s := unstarted.String(); s != "lost rank 3 (restart 2, before it rejoined): not started: no such file; 1 rank goes on" {
		t.Errorf("a restart that did not start: %q", s)
	}
	err := verdict(outcome{lost: []exit{killed, exited}}, "rank", 0, 0, func(exit) string { return "bye" })
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || !errors.Is(err, ErrFailed) ||
		!strings.HasPrefix(err.Error(), "every rank was lost, none succeeded; the last: rank 7 exited 1 after") {
		t.Errorf("every rank lost: %v", err)
	}
	if err := verdict(outcome{lost: []exit{killed}, succeeded: 3}, "rank", 0, 0, nil); err != nil {
		t.Errorf("one lost, three succeeded: %v", err)
	}
	err = verdict(outcome{lost: []exit{killed}, failed: []exit{exited}, succeeded: 1, stopped: 1}, "rank", 0, 0, func(exit) string { return "" })
	if err == nil || !strings.HasSuffix(err.Error(), "; 1 lost before; 1 other stopped") {
		t.Errorf("a failure after a loss: %v", err)
	}
}

// The launcher records a rank's report, for the start it names, and
// answers it; a report for another run or for a rank not of this node
// changes nothing and is answered with a refusal, which Joined returns as
// an error. A report without a start is of the first.
func TestJoinedListener(t *testing.T) {
	j, err := listenJoined("run-a", func(r int) bool { return r >= 4 && r < 8 }, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	report := func(line string) string {
		c, err := net.Dial("unix", j.path())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(c, line)
		ack, _ := bufio.NewReader(c).ReadString('\n')
		return ack
	}
	for _, bad := range []string{"joined run-b 5\n", "joined run-a 3\n", "joined run-a x\n", "hello\n",
		"joined run-a 5 -1\n", "joined run-a 5 x\n", "joined run-a 5 1 2\n"} {
		if ack := report(bad); ack != "refused\n" {
			t.Errorf("%q answered %q", bad, ack)
		}
	}
	for r := range 10 {
		if j.joined(r, 0) || j.joined(r, 1) {
			t.Fatalf("rank %d joined before any report was accepted", r)
		}
	}
	if ack := report("joined run-a 6\n"); ack != "ok\n" || !j.joined(6, 0) || j.joined(6, 1) {
		t.Errorf("a report without a start: %q; first start joined %v, restart 1 %v", ack, j.joined(6, 0), j.joined(6, 1))
	}
	t.Setenv(EnvJoined, j.path())
	t.Setenv(EnvRun, "run-a")
	t.Setenv(EnvRank, "5")
	t.Setenv(EnvRestartCount, "0")
	if err := Joined(); err != nil || !j.joined(5, 0) || j.joined(4, 0) || j.joined(5, 1) {
		t.Errorf("Joined: %v; rank 5 joined %v, rank 4 %v, rank 5's restart 1 %v", err, j.joined(5, 0), j.joined(4, 0), j.joined(5, 1))
	}
	t.Setenv(EnvRestartCount, "2")
	if err := Joined(); err != nil || !j.joined(5, 2) || j.joined(5, 1) {
		t.Errorf("Joined at restart 2: %v; restart 2 joined %v, restart 1 %v", err, j.joined(5, 2), j.joined(5, 1))
	}
	t.Setenv(EnvRestartCount, "two")
	if err := Joined(); !errors.Is(err, ErrBadArgument) {
		t.Errorf("a restart count that is no number: %v", err)
	}
	t.Setenv(EnvRestartCount, "")
	t.Setenv(EnvRank, "9")
	if err := Joined(); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a rank of another node: %v", err)
	}
	t.Setenv(EnvJoined, "")
	if err := Joined(); err != nil {
		t.Errorf("outside an elastic launch: %v", err)
	}
}
