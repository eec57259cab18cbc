package main

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// formBound bounds how long a group may take to form and finish its
// first all-reduces.
const formBound = 3 * time.Minute

// reportBound is how long a survivor is given to report a failure at all
// once a peer is killed (the target is much shorter: -kill-within).
const reportBound = 30 * time.Second

// killOutcome is one try: whether it passed, why not, the victim, and the
// survivors' detection and exit times after the kill.
type killOutcome struct {
	pass          bool
	reason        string
	victim, host  int
	detect, exits []time.Duration
}

// killExperiment: in a soak of all-reduces (-kill-size each), one rank is
// SIGKILLed a random 0-200 ms after every rank's second all-reduce, on
// host 0, then host 1, and so on in turn; a try passes when every survivor
// fails with ErrPeerLost within -kill-within. It runs at the first rate.
func (h *harness) killExperiment() (bool, error) {
	cfg := h.cfg
	r := cfg.rates[0]
	if err := h.net.setRate(r, cfg.burst); err != nil {
		return false, err
	}
	t := h.rep.Table(fmt.Sprintf("kill: a rank on each host in turn SIGKILLed in a %s all-reduce soak at %s (pass: every survivor ErrPeerLost within %v)",
		cfg.killSize, r, cfg.killWithin),
		append(append([]string{"hosts x ranks"}, cfg.variantCols()...), "joined with", "tries", "passed", "victims (rank@host)", "detection p50", "detection max", "survivors' exit max", "failures")...)
	total, passed := 0, 0
	for _, per := range cfg.perHost {
		for _, v := range cfg.variants() {
			var detect, exits []time.Duration
			var victims, fails []string
			ok, joined := 0, "?"
			for k := range cfg.killTries {
				o, j := h.killTry(per, v, k)
				if j != "?" {
					joined = j
				}
				detect, exits = append(detect, o.detect...), append(exits, o.exits...)
				victims = append(victims, fmt.Sprintf("%d@%d", o.victim, o.host))
				if o.pass {
					ok++
				} else {
					fails = append(fails, o.reason)
				}
				h.log.Infow("kill", "try", k+1, "victim", o.victim, "host", o.host, "pass", o.pass, "reason", o.reason, "detection", detect[len(detect)-len(o.detect):])
			}
			t.Row(append(append([]string{fmt.Sprintf("%d x %d", cfg.hosts, per)}, cfg.cells(v)...), joined,
				strconv.Itoa(cfg.killTries), strconv.Itoa(ok), strings.Join(victims, " "), rig.Secs(rig.Quantile(detect, 0.5)),
				rig.Secs(rig.Quantile(detect, 1)), rig.Secs(rig.Quantile(exits, 1)), rig.FirstFew(fails, 2))...)
			total += cfg.killTries
			passed += ok
		}
	}
	h.rep.Summarize("kill: %d of %d tries passed (every survivor ErrPeerLost within %v)", passed, total, cfg.killWithin)
	return passed == total, nil
}

// killTry runs try k: a fresh group, the victim on host k mod hosts. It
// returns the outcome and the data planes the ranks joined with.
func (h *harness) killTry(per int, v variant, k int) (o killOutcome, joined string) {
	args := []string{"check", "soak", "--backend=" + h.cfg.backend, "--size=" + h.cfg.killSize, "--iters=100000", "--timeout=60s"}
	c, err := h.startCluster(v.spec(per, h.cfg.algoEnv, args))
	o.host = k % h.cfg.hosts
	o.victim = o.host*per + h.intn(per)
	if err != nil {
		o.reason = err.Error()
		return o, "?"
	}
	defer c.ranks.Kill()
	defer func() {
		if !o.pass {
			if p := h.saveLog(fmt.Sprintf("kill-%dx%d-%s-try%d.log", h.cfg.hosts, per, v.tag(), k+1), c.transcript()); p != "" {
				o.reason += " (" + p + ")"
			}
		}
	}()
	if _, r, ok := c.ranks.AwaitAll(formBound, func(s string) bool { return s == "SOAK 1" }); !ok {
		o.reason = "before the kill: " + c.failure(r)
		return o, c.joined()
	}
	time.Sleep(time.Duration(h.intn(200)) * time.Millisecond)
	killed := time.Now()
	if err := c.ranks[o.victim].Signal(syscall.SIGKILL); err != nil {
		o.reason = fmt.Sprintf("SIGKILL rank %d: %v", o.victim, err)
		return o, c.joined()
	}
	o.pass = true
	for i, p := range c.ranks {
		if i == o.victim {
			continue
		}
		l, ok := p.Await(reportBound, func(s string) bool { return strings.HasPrefix(s, "CHECK soak/") })
		if p.Wait(reportBound) {
			_, _, at := p.Exited()
			o.exits = append(o.exits, at.Sub(killed))
		}
		lost := ok && strings.Contains(l.Text, " FAIL ErrPeerLost ")
		if lost {
			o.detect = append(o.detect, l.At.Sub(killed))
		}
		if !o.pass {
			continue
		}
		switch {
		case !ok:
			o.pass, o.reason = false, fmt.Sprintf("rank %d: no failure %v after: %s", i, reportBound, c.failure(i))
		case !lost:
			o.pass, o.reason = false, fmt.Sprintf("rank %d: %s", i, rig.Clip(l.Text, 200))
		case l.At.Sub(killed) > h.cfg.killWithin:
			o.pass, o.reason = false, fmt.Sprintf("rank %d (host %d): ErrPeerLost after %s", i, c.hostOf[i], rig.Secs(l.At.Sub(killed)))
		}
	}
	return o, c.joined()
}
