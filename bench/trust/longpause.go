package main

import (
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// longPauseExperiment: a random rank is stopped for longer than the peer
// timeout (CHOREO_PEER_TIMEOUT); a try passes when every other rank fails
// with ErrPeerLost (exit status 3, or the error's text in its output)
// within the bound after the pause starts. The row also gives the other
// ranks' exits and what the paused rank does once continued (it should
// fail by itself within the peer timeout + 5 s).
func (h *harness) longPauseExperiment() bool {
	cfg := h.cfg
	t := h.rep.Table(fmt.Sprintf("long pause: a random rank SIGSTOPped for %v with CHOREO_PEER_TIMEOUT=%v (pass: every other rank ErrPeerLost within %v of the pause start)",
		cfg.longPause, cfg.peerTimeout, cfg.detectWithin),
		"ranks", "transport", "tries", "passed", "detection min", "detection max", "others' exit max", "paused rank after SIGCONT", "failures")
	total, passed := 0, 0
	for _, n := range cfg.ranks {
		for _, tr := range cfg.transports {
			var fails failures
			var detect, exits durations
			var victims []string
			ok, valid := 0, 0
			for k := range cfg.longTries {
				tag := fmt.Sprintf("longpause-n%d-%s-try%d", n, tr, k+1)
				o, r := h.longPauseTry(n, tr, tag)
				detect, exits = append(detect, r.detect...), append(exits, r.exits...)
				if r.victim != "" {
					victims = append(victims, r.victim)
				}
				switch {
				case o.invalid:
				case o.pass:
					ok++
					valid++
				default:
					valid++
					fails.add(o.reason)
				}
				h.log.Infow("long pause", "try", tag, "pass", o.pass, "reason", o.reason, "detection", r.detect, "paused rank", r.victim)
			}
			t.Row(strconv.Itoa(n), tr, strconv.Itoa(cfg.longTries), strconv.Itoa(ok), rig.Secs(detect.min()), rig.Secs(detect.max()),
				rig.Secs(exits.max()), joinShort(victims), fails.String())
			total += valid
			passed += ok
		}
	}
	h.rep.Summarize("long pause: %d of %d valid tries passed (target: all, every other rank ErrPeerLost within %v)", passed, total, cfg.detectWithin)
	return passed == total
}

// longPauseResult is what one long-pause try measured: each other rank's
// detection (its peer-lost text or exit 3) and exit, after the pause
// start, and the paused rank's fate once continued.
type longPauseResult struct {
	detect, exits durations
	victim        string
}

// longPauseTry runs one try.
func (h *harness) longPauseTry(n int, tr, tag string) (o tryOutcome, r longPauseResult) {
	cfg := h.cfg
	c, err := h.startCluster(clusterSpec{n: n, transport: tr, args: h.runArgs(),
		env: []string{"CHOREO_PEER_TIMEOUT=" + cfg.peerTimeout.String()}})
	if err != nil {
		return tryOutcome{reason: err.Error()}, r
	}
	defer c.ranks.Kill()
	defer func() {
		if !o.pass && !o.invalid {
			if p := h.saveLog(tag+".log", c.transcript()); p != "" {
				o.reason += " (" + p + ")"
			}
		}
	}()
	if out, ok := c.running(cfg.warmup); !ok {
		return out, r
	}
	victim := h.intn(n)
	v := c.ranks[victim]
	stopped := time.Now()
	if err := v.Signal(syscall.SIGSTOP); err != nil {
		return tryOutcome{reason: fmt.Sprintf("SIGSTOP rank %d: %v", victim, err)}, r
	}
	// Until the pause ends or every other rank has exited.
	others := make([]*rig.Proc, 0, n-1)
	for i, p := range c.ranks {
		if i != victim {
			others = append(others, p)
		}
	}
	pauseEnd := stopped.Add(cfg.longPause)
	for _, p := range others {
		p.Wait(time.Until(pauseEnd))
	}
	time.Sleep(time.Until(pauseEnd))
	_ = v.Signal(syscall.SIGCONT)
	resumed := time.Now()
	// The paused rank's own end, bounded by the peer timeout + 5 s.
	if v.Wait(cfg.peerTimeout + 5*time.Second) {
		_, code, at := v.Exited()
		r.victim = fmt.Sprintf("exit %d after %.1f s", code, at.Sub(resumed).Seconds())
	} else {
		r.victim = fmt.Sprintf("running %v after", cfg.peerTimeout+5*time.Second)
	}
	o = tryOutcome{pass: true}
	for i, p := range c.ranks {
		if i == victim {
			continue
		}
		ended, code, at := p.Exited()
		l, said := p.Find(peerLost)
		var when time.Duration = -1
		switch {
		case said && !l.At.Before(stopped):
			when = l.At.Sub(stopped)
		case ended && code == 3:
			when = at.Sub(stopped)
		}
		if ended {
			r.exits = append(r.exits, at.Sub(stopped))
		}
		if when >= 0 {
			r.detect = append(r.detect, when)
		}
		if !o.pass {
			continue // the first reason is kept
		}
		switch {
		case ended && at.Before(stopped):
			o = tryOutcome{invalid: code == 0, reason: fmt.Sprintf("rank %d exit %d before the pause", i, code)}
		case when < 0 && !ended:
			o = tryOutcome{reason: fmt.Sprintf("paused rank %d; rank %d still running %v after the pause start, no ErrPeerLost", victim, i, cfg.longPause)}
		case when < 0:
			o = tryOutcome{reason: fmt.Sprintf("paused rank %d; rank %d exit %d without ErrPeerLost: %s", victim, i, code, failureLine(p))}
		case when > cfg.detectWithin:
			o = tryOutcome{reason: fmt.Sprintf("paused rank %d; rank %d ErrPeerLost only after %s", victim, i, rig.Secs(when))}
		}
	}
	return o, r
}

// joinShort is up to three items, "; "-separated, and how many more.
func joinShort(items []string) string {
	var f failures
	for _, s := range items {
		f.add(s)
	}
	return f.String()
}
