package test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/internal/testenv"
)

// Lines of an elastic soak that grows back (demo run --elastic under a
// launcher that restarts a lost rank), led by the launcher's "[rank] ".
var (
	grewLine    = regexp.MustCompile(`(?m)^\[(\d+)\] rank \d+: grew back at step (\d+): epoch (\d+), size (\d+), members \[([0-9 ]*)\] \(rank \d+ of \d+\), from \[([0-9 ]*)\], (\S+) after the loss was seen, t=(\d+)$`)
	tookUpLine  = regexp.MustCompile(`(?m)^\[(\d+)\] rank \d+: took up the soak at step (\d+): epoch (\d+), size (\d+), members \[([0-9 ]*)\] \(rank \d+ of \d+\), t=(\d+)$`)
	growthsLine = regexp.MustCompile(`(?m)^\[(\d+)\] rank \d+: growths (\d+), asks to grow (\d+)(, took up a lost rank)?$`)
)

// growSoak runs `choreorun --elastic -n 4 <launcher flags>` of `demo node
// run --elastic` over transport with the demo's flags, and returns the
// launcher's exit status, stdout and stderr, and all of it for messages.
func growSoak(t *testing.T, transport string, launcher []string, flags ...string) (code int, out, errw, dump string) {
	t.Helper()
	choreorun, _ := binaries(t)
	argv := append(append([]string{choreorun, "--elastic", "-n", "4", "--tag-output"}, launcher...),
		append([]string{demo, "node", "run", "--elastic", "--size", "16KiB", "--timeout", "60s"}, flags...)...)
	p := startProc(t, 4*time.Minute, []string{"CHOREO_TRANSPORT=" + transport}, argv...)
	code = p.wait()
	out, errw = p.stdout.String(), p.stderr.String()
	return code, out, errw, fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errw)
}

// growths is each rank's "growths N, asks to grow M" line: N, M and
// whether it took up a lost rank.
func growths(out string) map[string][3]string {
	m := map[string][3]string{}
	for _, l := range growthsLine.FindAllStringSubmatch(out, -1) {
		m[l[1]] = [3]string{l[2], l[3], l[4]}
	}
	return m
}

// Four processes soak all-reduces for 10 s in an elastic group under a
// launcher that restarts a lost rank once; rank 2 kills itself with
// SIGKILL at step 10. The three survivors shrink to epoch 1, the launcher
// starts rank 2 again, and at a step boundary the survivors' Grow admits
// it: every rank is at epoch 2 of ranks 0..3, the survivors at the same
// step, which the replacement takes up; the four end together after the
// same number of steps, every step checked exactly against the ranks of
// its epoch, and the launch exits 0. The time from the kill to the group
// back at 4 is logged, not bounded (a loaded machine). Over TCP (and
// shared memory with CHOREO_TEST_FULL=1).
func TestElasticSoakGrowsBack(t *testing.T) {
	const killAt = 10
	for _, transport := range transports {
		t.Run(transport, func(t *testing.T) {
			testenv.Sliced(t, transport == "tcp")
			code, out, errw, dump := growSoak(t, transport, []string{"--max-restarts", "1"},
				"--duration", "10s", "--kill-rank", "2", "--kill-at", strconv.Itoa(killAt))
			if code != 0 {
				t.Fatalf("the launch failed: %s", dump)
			}
			if n := strings.Count(errw, "choreorun: lost rank"); n != 1 || !strings.Contains(errw, "choreorun: lost rank 2: killed by SIGKILL after ") {
				t.Errorf("%d lost lines, want one for rank 2 killed by SIGKILL: %s", n, dump)
			}
			if !strings.Contains(errw, "choreorun: restarting rank 2 (restart 1 of 1; CHOREO_RESTART_COUNT=1)") {
				t.Errorf("no line of rank 2 restarted: %s", dump)
			}
			kills := killLine.FindAllStringSubmatch(out, -1)
			if len(kills) != 1 || kills[0][1] != "2" || kills[0][2] != strconv.Itoa(killAt) {
				t.Fatalf("want one kill line, of rank 2 at step %d (the replacement does not kill itself): %s", killAt, dump)
			}
			killed, _ := strconv.ParseInt(kills[0][3], 10, 64)
			took := tookUpLine.FindAllStringSubmatch(out, -1)
			if len(took) != 1 || took[0][1] != "2" || took[0][3] != "2" || took[0][4] != "4" || took[0][5] != "0 1 2 3" {
				t.Fatalf("want one line of rank 2 taking up the soak at epoch 2, size 4, members [0 1 2 3]: %s", dump)
			}
			step := took[0][2]
			grew := map[string]bool{}
			for _, m := range grewLine.FindAllStringSubmatch(out, -1) {
				if m[2] != step || m[3] != "2" || m[4] != "4" || m[5] != "0 1 2 3" || m[6] != "0 1 3" || grew[m[1]] {
					t.Errorf("rank %s grew back at step %s to epoch %s, size %s, members [%s] from [%s]; want once, at step %s (the replacement's), epoch 2, size 4, [0 1 2 3] from [0 1 3]: %s",
						m[1], m[2], m[3], m[4], m[5], m[6], step, dump)
				}
				grew[m[1]] = true
				at, _ := strconv.ParseInt(m[8], 10, 64)
				t.Logf("%s: rank %s: back to 4 ranks %v after the kill (%s after its own loss was seen), at step %s",
					transport, m[1], time.Duration(at-killed).Round(time.Millisecond), m[7], m[2])
			}
			gs := growths(out)
			steps := ""
			done := soakDoneLine.FindAllStringSubmatch(out, -1)
			for _, m := range done {
				r := m[1]
				shrinks, grown, tookUp := "1", "1", ""
				if r == "2" {
					shrinks, grown, tookUp = "0", "0", ", took up a lost rank"
				}
				if steps == "" {
					steps = m[2]
				}
				if m[2] != steps || m[3] != "2" || m[4] != shrinks || m[5] != "0 1 2 3" || m[6] != m[7] || m[6] == "0" {
					t.Errorf("rank %s ended: %s steps, epoch %s, %s shrinks, members [%s], checks %s/%s; want %s steps (as the others), epoch 2, %s shrinks, [0 1 2 3], every check passed: %s",
						r, m[2], m[3], m[4], m[5], m[6], m[7], steps, shrinks, dump)
				}
				if got := gs[r]; got[0] != grown || got[2] != tookUp || (r == "2") != (got[1] == "0") {
					t.Errorf("rank %s: growths %s, asks to grow %s%s; want %s growths, asks on a survivor only, the replacement saying so: %s",
						r, got[0], got[1], got[2], grown, dump)
				}
			}
			if len(done) != 4 || len(grew) != 3 || grew["2"] {
				t.Errorf("%d ranks ended, %d survivors grew back (%v), want 4 and ranks 0, 1 and 3: %s", len(done), len(grew), grew, dump)
			}
		})
	}
}

// The twins: a rank lost under a launcher that does not restart it
// leaves the survivors asking to grow back before each step, Grow
// returning their group every time (no growth, epoch 1 to the end, as
// many asks as steps after the loss); a soak that loses no rank never
// asks.
func TestElasticSoakGrowsOnlyWhenReplaced(t *testing.T) {
	t.Run("lost, not restarted", func(t *testing.T) {
		const steps, killAt = 24, 8
		code, out, errw, dump := growSoak(t, "tcp", nil, "--steps", strconv.Itoa(steps), "--kill-rank", "2", "--kill-at", strconv.Itoa(killAt))
		if code != 0 || strings.Contains(errw, "restarting rank") || grewLine.MatchString(out) || tookUpLine.MatchString(out) {
			t.Fatalf("want exit 0, no restart, no growth: %s", dump)
		}
		gs := growths(out)
		for _, r := range []string{"0", "1", "3"} {
			if g := gs[r]; g != [3]string{"0", strconv.Itoa(steps - killAt), ""} {
				t.Errorf("rank %s: growths %s, asks to grow %s; want 0 growths and an ask before each of the %d steps after the loss: %s",
					r, g[0], g[1], steps-killAt, dump)
			}
		}
		done := soakDoneLine.FindAllStringSubmatch(out, -1)
		for _, m := range done {
			if m[2] != strconv.Itoa(steps) || m[3] != "1" || m[5] != "0 1 3" || m[6] != m[7] {
				t.Errorf("rank %s ended: %v; want %d steps at epoch 1 of [0 1 3], every check passed: %s", m[1], m[2:], steps, dump)
			}
		}
		if len(done) != 3 {
			t.Errorf("%d ranks ended, want the 3 survivors: %s", len(done), dump)
		}
	})
	t.Run("no loss", func(t *testing.T) {
		code, out, _, dump := growSoak(t, "tcp", []string{"--max-restarts", "1"}, "--steps", "12")
		gs := growths(out)
		if code != 0 || len(gs) != 4 || grewLine.MatchString(out) {
			t.Fatalf("want exit 0, four ranks' growth lines, no growth: %s", dump)
		}
		for r, g := range gs {
			if g != [3]string{"0", "0", ""} {
				t.Errorf("rank %s: growths %s, asks to grow %s%s; want neither: %s", r, g[0], g[1], g[2], dump)
			}
		}
	})
}
