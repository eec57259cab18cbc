package main

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// soakArgs is `demo node check soak` of size-byte all-reduces, iters of
// them.
func soakArgs(size, iters int) []string {
	return []string{"check", "soak", "--size=" + strconv.Itoa(size), "--iters=" + strconv.Itoa(iters), "--timeout=60s"}
}

// killExperiment: a random rank of a 64 MiB all-reduce soak is SIGKILLed
// a random moment (0-200 ms) after every rank's second all-reduce; a try
// passes when every survivor reports ErrPeerLost (its "CHECK soak/<k>
// FAIL ErrPeerLost" line) within the bound.
func (h *harness) killExperiment() bool {
	cfg := h.cfg
	t := h.rep.Table(fmt.Sprintf("kill: a random rank SIGKILLed in a 64 MiB all-reduce soak (pass: every survivor ErrPeerLost within %v)", cfg.killWithin),
		"ranks", "transport", "tries", "passed", "detection p50", "detection max", "survivors' exit max", "failures")
	total, passed := 0, 0
	for _, n := range cfg.ranks {
		for _, tr := range cfg.transports {
			var fails failures
			var detect, exits durations
			ok := 0
			for k := range cfg.killTries {
				tag := fmt.Sprintf("kill-n%d-%s-try%d", n, tr, k+1)
				o, d, e := h.killTry(n, tr, tag)
				detect, exits = append(detect, d...), append(exits, e...)
				if o.pass {
					ok++
				} else {
					fails.add(o.reason)
				}
				h.log.Infow("kill", "try", tag, "pass", o.pass, "reason", o.reason, "detection", d)
			}
			t.Row(strconv.Itoa(n), tr, strconv.Itoa(cfg.killTries), strconv.Itoa(ok), rig.Secs(detect.quantile(0.5)), rig.Secs(detect.max()),
				rig.Secs(exits.max()), fails.String())
			total += cfg.killTries
			passed += ok
		}
	}
	h.rep.Summarize("kill: %d of %d tries passed (target: all, every survivor ErrPeerLost within %v)", passed, total, cfg.killWithin)
	return passed == total
}

// killTry runs one try; detect and exits are the survivors' times after
// the kill.
func (h *harness) killTry(n int, tr, tag string) (o tryOutcome, detect, exits durations) {
	c, err := h.startCluster(clusterSpec{n: n, transport: tr, args: soakArgs(64<<20, 100000)})
	if err != nil {
		return tryOutcome{reason: err.Error()}, nil, nil
	}
	defer c.ranks.Kill()
	defer func() {
		if !o.pass {
			if p := h.saveLog(tag+".log", c.transcript()); p != "" {
				o.reason += " (" + p + ")"
			}
		}
	}()
	if _, r, ok := c.ranks.AwaitAll(joinBound, func(s string) bool { return s == "SOAK 1" }); !ok {
		return tryOutcome{reason: c.notReached(r, "its second all-reduce", joinBound)}, nil, nil
	}
	time.Sleep(time.Duration(h.intn(200)) * time.Millisecond)
	victim := h.intn(n)
	killed := time.Now()
	if err := c.ranks[victim].Signal(syscall.SIGKILL); err != nil {
		return tryOutcome{reason: fmt.Sprintf("SIGKILL rank %d: %v", victim, err)}, nil, nil
	}
	o = tryOutcome{pass: true}
	for i, p := range c.ranks {
		if i == victim {
			continue
		}
		l, ok := p.Await(30*time.Second, func(s string) bool { return strings.HasPrefix(s, "CHECK soak/") })
		if p.Wait(30 * time.Second) {
			_, _, at := p.Exited()
			exits = append(exits, at.Sub(killed))
		}
		if ok && strings.Contains(l.Text, " FAIL ErrPeerLost ") {
			detect = append(detect, l.At.Sub(killed))
		}
		if !o.pass {
			continue
		}
		switch {
		case !ok:
			o = tryOutcome{reason: fmt.Sprintf("killed rank %d; rank %d: no failure 30 s after: %s", victim, i, failureLine(p))}
		case !strings.Contains(l.Text, " FAIL ErrPeerLost "):
			o = tryOutcome{reason: fmt.Sprintf("killed rank %d; rank %d: %s", victim, i, rig.Clip(l.Text, 200))}
		case l.At.Sub(killed) > h.cfg.killWithin:
			o = tryOutcome{reason: fmt.Sprintf("killed rank %d; rank %d ErrPeerLost after %s", victim, i, rig.Secs(l.At.Sub(killed)))}
		}
	}
	return o, detect, exits
}
