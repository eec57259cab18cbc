package test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Lines of an elastic soak (demo run --elastic), led by the launcher's
// "[rank] ".
var (
	killLine      = regexp.MustCompile(`(?m)^\[(\d+)\] rank \d+: killing itself \(SIGKILL\) at step (\d+), epoch 0, t=(\d+)$`)
	recoveredLine = regexp.MustCompile(`(?m)^\[(\d+)\] rank \d+: epoch (\d+), members \[([0-9 ]*)\] \(rank \d+ of (\d+)\): step (\d+) done (\S+) after the failure \(([^)]*)\), t=(\d+)$`)
	soakDoneLine  = regexp.MustCompile(`(?m)^\[(\d+)\] rank \d+: elastic soak done: (\d+) steps, epoch (\d+) \((\d+) shrinks\), members \[([0-9 ]*)\] \(rank \d+ of \d+\), checks passed (\d+)/(\d+), all-reduce p50 (\S+)$`)
)

// elasticSoak runs `choreorun --elastic -n 4` of `demo node run --elastic`
// over transport with the demo's flags, and returns the launcher's exit
// status, stdout and stderr.
func elasticSoak(t *testing.T, transport string, flags ...string) (int, string, string) {
	t.Helper()
	choreorun, _ := binaries(t)
	argv := append([]string{choreorun, "--elastic", "-n", "4", "--tag-output", demo, "node", "run", "--elastic",
		"--size", "64KiB", "--timeout", "60s"}, flags...)
	p := startProc(t, 4*time.Minute, []string{"CHOREO_TRANSPORT=" + transport}, argv...)
	code := p.wait()
	return code, p.stdout.String(), p.stderr.String()
}

// Four processes soak all-reduces in an elastic group; rank 2 kills
// itself with SIGKILL at step 20. The three survivors shrink to an epoch
// of ranks 0, 1 and 3, redo step 20 there and finish every step, each
// checked exactly against the ranks of its epoch; the launcher prints one
// line for the lost rank and exits 0. The time from the kill to each
// survivor's next all-reduce is printed, not bounded (a loaded machine).
// Over TCP and over shared memory.
func TestElasticSoakSurvivesAKill(t *testing.T) {
	const steps, killAt = 40, 20
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			code, out, errw := elasticSoak(t, transport, "--steps", strconv.Itoa(steps),
				"--kill-rank", "2", "--kill-at", strconv.Itoa(killAt))
			dump := fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errw)
			if code != 0 {
				t.Fatalf("the launch failed: %s", dump)
			}
			if n := strings.Count(errw, "choreorun: lost rank"); n != 1 || !strings.Contains(errw, "choreorun: lost rank 2: killed by SIGKILL after ") {
				t.Errorf("%d lost lines, want one for rank 2 killed by SIGKILL: %s", n, dump)
			}
			kill := killLine.FindStringSubmatch(out)
			if kill == nil || kill[1] != "2" || kill[2] != strconv.Itoa(killAt) {
				t.Fatalf("no kill line of rank 2 at step %d: %s", killAt, dump)
			}
			killed, _ := strconv.ParseInt(kill[3], 10, 64)
			recovered := map[string]bool{}
			for _, m := range recoveredLine.FindAllStringSubmatch(out, -1) {
				if m[2] != "1" || m[3] != "0 1 3" || m[4] != "3" || m[5] != strconv.Itoa(killAt) {
					t.Errorf("rank %s recovered into epoch %s, members [%s], step %s; want epoch 1, [0 1 3], step %d: %s",
						m[1], m[2], m[3], m[5], killAt, dump)
				}
				done, _ := strconv.ParseInt(m[8], 10, 64)
				t.Logf("%s: rank %s: kill to next all-reduce %v (failure seen to next all-reduce %s, %s)",
					transport, m[1], time.Duration(done-killed).Round(time.Microsecond), m[6], m[7])
				recovered[m[1]] = true
			}
			finished := map[string]bool{}
			for _, m := range soakDoneLine.FindAllStringSubmatch(out, -1) {
				if m[2] != strconv.Itoa(steps) || m[3] != "1" || m[4] != "1" || m[5] != "0 1 3" || m[6] != m[7] || m[6] == "0" {
					t.Errorf("rank %s ended: %s steps, epoch %s, %s shrinks, members [%s], checks %s/%s; want %d steps, epoch 1, 1 shrink, [0 1 3], every check passed",
						m[1], m[2], m[3], m[4], m[5], m[6], m[7], steps)
				}
				finished[m[1]] = true
				t.Logf("%s: rank %s: an all-reduce's p50 %s", transport, m[1], m[8])
			}
			for _, r := range []string{"0", "1", "3"} {
				if !recovered[r] || !finished[r] {
					t.Errorf("survivor %s: recovered %v, finished %v: %s", r, recovered[r], finished[r], dump)
				}
			}
			if finished["2"] || recovered["2"] {
				t.Errorf("the killed rank went on: %s", dump)
			}
		})
	}
}

// The twin: an elastic soak that loses no rank never shrinks, and the
// launcher reports no loss.
func TestElasticSoakWithoutLoss(t *testing.T) {
	code, out, errw := elasticSoak(t, "tcp", "--steps", "20")
	dump := fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errw)
	if code != 0 || strings.Contains(errw, "lost rank") || recoveredLine.MatchString(out) {
		t.Fatalf("want exit 0, no loss, no recovery: %s", dump)
	}
	done := soakDoneLine.FindAllStringSubmatch(out, -1)
	if len(done) != 4 {
		t.Fatalf("%d ranks finished, want 4: %s", len(done), dump)
	}
	for _, m := range done {
		if m[2] != "20" || m[3] != "0" || m[4] != "0" || m[5] != "0 1 2 3" || m[6] != m[7] || m[6] != "20" {
			t.Errorf("rank %s: %v; want 20 steps at epoch 0 of [0 1 2 3], every check passed", m[1], m[2:])
		}
	}
}
