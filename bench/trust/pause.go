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

// joinBound bounds a cluster's forming and first step.
const joinBound = 90 * time.Second

// checksLine is rank 0's last line of `demo node run`.
var checksLine = regexp.MustCompile(`checks passed: (\d+)/(\d+)`)

// runArgs is `demo node run` for the pause experiments: steps 1 MiB
// all-reduces, each collective's deadline 30 s (beyond every pause but the
// long one).
func (h *harness) runArgs() []string {
	return []string{"run", "--steps=" + strconv.Itoa(h.cfg.steps), "--size=1048576", "--timeout=30s"}
}

// tryOutcome is one try's verdict: passed, or failed with a reason, or
// invalid (the run ended before the disturbance was over, so the try
// says nothing). log is where its output was kept, when it failed.
type tryOutcome struct {
	pass, invalid bool
	reason        string
}

// pauseExperiment: a random rank of a running cluster is stopped
// (SIGSTOP) for a pause and continued (SIGCONT); a try passes when every
// rank exits 0 with its checks passed.
func (h *harness) pauseExperiment() bool {
	t := h.rep.Table(fmt.Sprintf("pause: a random rank SIGSTOPped for the pause, then SIGCONTed, in `demo node run --steps %d --size 1MiB` (pass: every rank exits 0, checks passed)", h.cfg.steps),
		"ranks", "transport", "pause", "tries", "passed", "failed", "invalid", "resume to end p50", "resume to end max", "failures")
	total, passed := 0, 0
	for _, n := range h.cfg.ranks {
		for _, tr := range h.cfg.transports {
			for _, pause := range h.cfg.pauses {
				var fails failures
				var tail durations
				ok, invalid := 0, 0
				for k := range h.cfg.tries {
					tag := fmt.Sprintf("pause-n%d-%s-%v-try%d", n, tr, pause, k+1)
					o, end := h.pauseTry(n, tr, pause, tag)
					switch {
					case o.invalid:
						invalid++
					case o.pass:
						ok++
						tail = append(tail, end)
					default:
						fails.add(o.reason)
					}
					h.log.Infow("pause", "try", tag, "pass", o.pass, "invalid", o.invalid, "reason", o.reason)
				}
				t.Row(strconv.Itoa(n), tr, pause.String(), strconv.Itoa(h.cfg.tries), strconv.Itoa(ok),
					strconv.Itoa(h.cfg.tries-ok-invalid), strconv.Itoa(invalid), rig.Secs(tail.quantile(0.5)), rig.Secs(tail.max()), fails.String())
				total += h.cfg.tries - invalid
				passed += ok
			}
		}
	}
	h.rep.Summarize("pause: %d of %d valid tries passed (target: all)", passed, total)
	return passed == total
}

// pauseTry runs one try; end is the time from the resume to the last
// rank's exit.
func (h *harness) pauseTry(n int, tr string, pause time.Duration, tag string) (o tryOutcome, end time.Duration) {
	c, err := h.startCluster(clusterSpec{n: n, transport: tr, args: h.runArgs()})
	if err != nil {
		return tryOutcome{reason: err.Error()}, 0
	}
	defer c.ranks.Kill()
	defer func() {
		if !o.pass && !o.invalid {
			if p := h.saveLog(tag+".log", c.transcript()); p != "" {
				o.reason += " (" + p + ")"
			}
		}
	}()
	if out, ok := c.running(h.cfg.warmup); !ok {
		return out, 0
	}
	victim := h.intn(n)
	v := c.ranks[victim]
	stopped := time.Now()
	if err := v.Signal(syscall.SIGSTOP); err != nil {
		return tryOutcome{reason: fmt.Sprintf("SIGSTOP rank %d: %v", victim, err)}, 0
	}
	time.Sleep(pause - time.Since(stopped))
	_ = v.Signal(syscall.SIGCONT)
	resumed := time.Now()
	for r, p := range c.ranks {
		if ended, code, _ := p.Exited(); ended && code == 0 && r != victim {
			return tryOutcome{invalid: true, reason: fmt.Sprintf("rank %d finished during the pause", r)}, 0
		}
	}
	if !c.ranks.WaitAll(h.cfg.tryTimeout) {
		return tryOutcome{reason: fmt.Sprintf("paused rank %d; %s still running %v after the resume", victim, c.stillRunning(), h.cfg.tryTimeout)}, 0
	}
	end = time.Since(resumed)
	for r, p := range c.ranks {
		if _, code, _ := p.Exited(); code != 0 {
			return tryOutcome{reason: fmt.Sprintf("paused rank %d; rank %d exit %d: %s", victim, r, code, failureLine(p))}, 0
		}
	}
	l, ok := c.ranks[0].Find(checksLine.MatchString)
	if !ok {
		return tryOutcome{reason: "rank 0 printed no checks line"}, 0
	}
	m := checksLine.FindStringSubmatch(l.Text)
	if m[1] != m[2] || m[2] == "0" {
		return tryOutcome{reason: "rank 0: " + l.Text}, 0
	}
	return tryOutcome{pass: true}, end
}

// running waits for rank 0's loop to start (its "choreo demo:" line) and
// then for warmup; ok when every rank is still running then.
func (c *cluster) running(warmup time.Duration) (tryOutcome, bool) {
	if _, ok := c.ranks[0].Await(joinBound, func(s string) bool { return strings.HasPrefix(s, "choreo demo:") }); !ok {
		for r, p := range c.ranks {
			if ended, code, _ := p.Exited(); ended {
				return tryOutcome{reason: fmt.Sprintf("before the loop: rank %d exit %d: %s", r, code, failureLine(p))}, false
			}
		}
		return tryOutcome{reason: fmt.Sprintf("rank 0's loop did not start within %v", joinBound)}, false
	}
	time.Sleep(warmup)
	for r, p := range c.ranks {
		if ended, code, _ := p.Exited(); ended {
			if code == 0 {
				return tryOutcome{invalid: true, reason: fmt.Sprintf("rank %d finished before the pause", r)}, false
			}
			return tryOutcome{reason: fmt.Sprintf("before the pause: rank %d exit %d: %s", r, code, failureLine(p))}, false
		}
	}
	return tryOutcome{}, true
}

// stillRunning names the ranks still running ("ranks 1, 2").
func (c *cluster) stillRunning() string {
	var rs []string
	for r, p := range c.ranks {
		if ended, _, _ := p.Exited(); !ended {
			rs = append(rs, strconv.Itoa(r))
		}
	}
	if len(rs) == 1 {
		return "rank " + rs[0]
	}
	return "ranks " + strings.Join(rs, ", ")
}

// failureLine is the line that best says why a rank failed: its "error:"
// or "demo:" line, a CHECK FAIL line, else its last line.
func failureLine(p *rig.Proc) string {
	for _, prefix := range []string{"  error:", "demo:", "CHECK "} {
		for _, l := range p.Lines() {
			t := l.Text
			if strings.HasPrefix(t, prefix) && (prefix != "CHECK " || strings.Contains(t, " FAIL ")) {
				return rig.Clip(strings.TrimSpace(t), 200)
			}
		}
	}
	return p.LastLine(200)
}

// peerLost reports whether a line says a peer was lost.
func peerLost(s string) bool {
	return strings.Contains(s, "ErrPeerLost") || strings.Contains(strings.ToLower(s), "peer lost")
}
