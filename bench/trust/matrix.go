package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// matrixBound bounds one `demo launch -n 4 check matrix`.
const matrixBound = 5 * time.Minute

// doneLine is a check's last line on each rank.
var doneLine = regexp.MustCompile(`CHECK done ok=(\d+) failed=(\d+) live-fences=(-?\d+)`)

// busyLoops starts n shell loops that spin a processor each and returns a
// function that stops them (kids.killAll would too).
func (h *harness) busyLoops(n int) (stop func(), err error) {
	var ps []*rig.Proc
	stop = func() {
		for _, p := range ps {
			p.Kill()
		}
	}
	for i := range n {
		p, err := rig.StartProc(kids, fmt.Sprintf("busy %d", i), []string{"sh", "-c", "while :; do :; done"}, nil)
		if err != nil {
			stop()
			return nil, err
		}
		ps = append(ps, p)
	}
	return stop, nil
}

// matrixExperiment: `demo launch -n 4 check matrix` run after run beside
// busy CPU loops; a run passes when the launcher exits 0 and every rank's
// last line says ok>0, failed=0, live-fences=0.
func (h *harness) matrixExperiment() bool {
	cfg := h.cfg
	t := h.rep.Table(fmt.Sprintf("matrix under load: `demo launch -n 4 check matrix` beside %d busy CPU loops (pass: exit 0, every rank failed=0 live-fences=0)", cfg.busyLoops),
		"transport", "runs", "failed", "run p50", "run max", "failures")
	stop, err := h.busyLoops(cfg.busyLoops)
	if err != nil {
		h.log.Errorw("busy loops", "err", err)
		h.rep.Summarize("matrix: not run: %v", err)
		return false
	}
	defer stop()
	total, failedAll := 0, 0
	for _, tr := range cfg.matrixTransports {
		var fails failures
		var times durations
		failed := 0
		for k := range cfg.matrixRuns {
			tag := fmt.Sprintf("matrix-%s-run%d", tr, k+1)
			o, d := h.matrixRun(tr, tag)
			if o.pass {
				times = append(times, d)
			} else {
				failed++
				fails.add(o.reason)
			}
			h.log.Infow("matrix", "run", tag, "pass", o.pass, "took", d.Round(time.Millisecond), "reason", o.reason)
		}
		t.Row(tr, strconv.Itoa(cfg.matrixRuns), strconv.Itoa(failed), rig.Secs(times.quantile(0.5)), rig.Secs(times.max()), fails.String())
		total += cfg.matrixRuns
		failedAll += failed
	}
	h.rep.Summarize("matrix: %d of %d runs failed beside %d busy loops (target: 0)", failedAll, total, cfg.busyLoops)
	return failedAll == 0
}

// matrixRun runs the launcher once, bounded: past matrixBound it is sent
// SIGINT (it stops its ranks within its grace) and, 15 s later, SIGKILL
// (its ranks die with it).
func (h *harness) matrixRun(tr, tag string) (o tryOutcome, took time.Duration) {
	p, err := rig.StartProc(kids, "launch", []string{h.demo, "launch", "-n", "4", "check", "matrix"}, []string{"CHOREO_TRANSPORT=" + tr})
	if err != nil {
		return tryOutcome{reason: err.Error()}, 0
	}
	defer p.Kill()
	defer func() {
		if !o.pass {
			if path := h.saveLog(tag+".log", p.Transcript(p.Started, "")); path != "" {
				o.reason += " (" + path + ")"
			}
		}
	}()
	if !p.Wait(matrixBound) {
		_ = syscall.Kill(p.Pid(), syscall.SIGINT)
		if !p.Wait(15 * time.Second) {
			p.Kill()
		}
		return tryOutcome{reason: fmt.Sprintf("still running after %v", matrixBound)}, 0
	}
	_, code, at := p.Exited()
	took = at.Sub(p.Started)
	var ends []string
	for _, l := range p.Lines() {
		if m := doneLine.FindStringSubmatch(l.Text); m != nil && (m[1] == "0" || m[2] != "0" || m[3] != "0") {
			ends = append(ends, m[0])
		} else if m != nil {
			ends = append(ends, "")
		}
	}
	if code != 0 || len(ends) != 4 || strings.Join(ends, "") != "" {
		return tryOutcome{reason: fmt.Sprintf("exit %d, %d of 4 ranks done: %s", code, len(ends), matrixFailure(p))}, took
	}
	return tryOutcome{pass: true}, took
}

// matrixFailure is the launcher's verdict line, or the first failed step.
func matrixFailure(p *rig.Proc) string {
	var first string
	for _, l := range p.Lines() {
		if strings.HasPrefix(l.Text, "demo: launch:") {
			return rig.Clip(l.Text, 200)
		}
		if first == "" && strings.Contains(l.Text, " FAIL ") {
			first = rig.Clip(strings.TrimSpace(l.Text), 200)
		}
	}
	if first != "" {
		return first
	}
	return p.LastLine(200)
}
