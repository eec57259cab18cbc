package main

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// checkDone matches the last line of `demo node check`: the steps that
// passed and failed, and the fences still live.
var checkDone = regexp.MustCompile(`^CHECK done ok=(\d+) failed=(\d+) live-fences=(-?\d+)$`)

// matrixExperiment runs `demo node check matrix` (every op, dtype and
// shape of the check, each checked element by element) on every ranks per
// host and variant at the first rate; a group passes when every rank
// exits 0 and says failed=0 with its steps done.
func (h *harness) matrixExperiment() (bool, error) {
	cfg := h.cfg
	r := cfg.rates[0]
	if err := h.net.setRate(r, cfg.burst); err != nil {
		return false, err
	}
	t := h.rep.Table(fmt.Sprintf("matrix: `demo node check matrix` at %s (pass: every rank exits 0, every step exact)", r),
		append(append([]string{"hosts x ranks"}, cfg.variantCols()...), "joined with", "steps ok (each rank)", "steps failed", "time", "result")...)
	groups, passed := 0, 0
	for _, per := range cfg.perHost {
		for _, v := range cfg.variants() {
			groups++
			t0 := time.Now()
			steps, failed, joined, fail := h.matrixGroup(per, v)
			result := "pass"
			if fail != "" {
				result = "FAILED: " + fail
			} else {
				passed++
			}
			t.Row(append(append([]string{fmt.Sprintf("%d x %d", cfg.hosts, per)}, cfg.cells(v)...), joined, steps, failed,
				rig.Secs(time.Since(t0)), result)...)
			h.log.Infow("matrix", "hosts", cfg.hosts, "per host", per, "variant", v.tag(), "result", result)
		}
	}
	h.rep.Summarize("matrix: %d of %d groups passed every step", passed, groups)
	return passed == groups, nil
}

// matrixGroup runs the check matrix once: the steps each rank passed (a
// range when they differ), the failed steps over all ranks, the data
// planes joined with, and why it failed ("" when it passed).
func (h *harness) matrixGroup(per int, v variant) (steps, failed, joined, fail string) {
	args := []string{"check", "matrix", "--backend=" + h.cfg.backend}
	c, err := h.startCluster(v.spec(per, h.cfg.algoEnv, args))
	if err != nil {
		return "-", "-", "?", err.Error()
	}
	defer c.ranks.Kill()
	defer func() {
		if fail != "" {
			if p := h.saveLog(fmt.Sprintf("matrix-%dx%d-%s.log", h.cfg.hosts, per, v.tag()), c.transcript()); p != "" {
				fail += " (" + p + ")"
			}
		}
	}()
	if !c.ranks.WaitAll(h.cfg.timeout) {
		fail = fmt.Sprintf("not done within %v", h.cfg.timeout)
	}
	lo, hi, bad := -1, -1, 0
	for r, p := range c.ranks {
		l, ok := p.Await(0, checkDone.MatchString)
		if !ok {
			if fail == "" {
				fail = "no CHECK done line: " + c.failure(r)
			}
			continue
		}
		m := checkDone.FindStringSubmatch(l.Text)
		n, _ := strconv.Atoi(m[1])
		f, _ := strconv.Atoi(m[2])
		bad += f
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
		if ended, code, _ := p.Exited(); fail == "" && (f > 0 || n == 0 || m[3] != "0" || !ended || code != 0) {
			fail = fmt.Sprintf("rank %d: %s: %s", r, l.Text, c.failure(r))
		}
	}
	steps = strconv.Itoa(lo)
	if lo != hi {
		steps = fmt.Sprintf("%d-%d", lo, hi)
	}
	return steps, strconv.Itoa(bad), c.joined(), fail
}
