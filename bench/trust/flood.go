package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// formationIters is the soak of the formation runs: 1 MiB all-reduces.
const formationIters = 200

// shmPrefix leads the abstract names of the shared-memory transport's
// sockets on Linux ("@choreo-shm/<run>-<group>/<group>/<rank>"), which
// exist while a group's data plane connects.
const shmPrefix = "@choreo-shm/"

// floodExperiment runs the formation part (a 4-rank cluster forming, with
// and without silent connections on every listener of every rank) and the
// attacks on a running cluster (attack.go).
// Either part runs alone when -only names it; the attacks' soak is then
// sized from a default time per all-reduce.
func (h *harness) floodExperiment() bool {
	ok, perIter := true, time.Duration(0)
	if h.cfg.wants("formation") {
		ok, perIter = h.formation()
	}
	if h.cfg.wants("attacks") && !h.attacks(perIter) {
		ok = false
	}
	return ok
}

// formation: for each transport, formations of 4 ranks without a flood
// and with one, in turn; the flood holds floodConns silent connections,
// redialled as they are closed, on every rank's control port (from the
// hostfile, from the start) and on every other listening socket the rank
// opens (its data listener, its shared-memory socket: found in /proc as
// they appear, every 10 ms: a new TCP listener is flooded when a rank's
// descriptors hold it, the shared-memory socket is known by its name,
// which carries the run's). Formation time: from the start of the processes to every
// rank's first all-reduce done ("SOAK 0"). It returns whether every run
// formed and completed, and the unflooded runs' median time per 1 MiB
// all-reduce (for sizing the attack runs; 0 when none was measured).
func (h *harness) formation() (bool, time.Duration) {
	cfg := h.cfg
	t := h.rep.Table(fmt.Sprintf("flood while forming: 4 ranks, `demo node check soak --size 1MiB --iters %d`, with and without %d silent connections per listener (pass: forms, completes; target: flooded formation within 2x the unflooded)", formationIters, cfg.floodConns),
		"transport", "flood", "tries", "formed and completed", "formation p50", "formation max", "vs unflooded p50", "listeners flooded", "flood dials", "failures")
	allOK := true
	var perIters durations
	for _, tr := range cfg.transports {
		var base durations
		for _, flooded := range []bool{false, true} {
			var fails failures
			var form durations
			ok := 0
			var flooders []string
			var dials int64
			for k := range cfg.floodTries {
				tag := fmt.Sprintf("formation-%s-flood=%v-try%d", tr, flooded, k+1)
				r := h.formationTry(tr, flooded, tag)
				if r.formed >= 0 {
					form = append(form, r.formed)
				}
				if r.perIter > 0 {
					perIters = append(perIters, r.perIter)
				}
				if r.o.pass {
					ok++
				} else {
					fails.add(r.o.reason)
				}
				flooders, dials = r.listeners, dials+r.dials
				h.log.Infow("formation", "try", tag, "pass", r.o.pass, "formed", r.formed.Round(time.Millisecond), "reason", r.o.reason)
			}
			vs := "-"
			if flooded && len(base) > 0 && len(form) > 0 {
				ratio := form.quantile(0.5).Seconds() / base.quantile(0.5).Seconds()
				vs = fmt.Sprintf("%.2fx", ratio)
				h.rep.Summarize("flood while forming (%s): flooded formation p50 %s = %s of the unflooded %s (target: at most 2x)", tr, rig.Secs(form.quantile(0.5)), vs, rig.Secs(base.quantile(0.5)))
				if ratio > 2 {
					allOK = false
				}
			}
			if !flooded {
				base = form
			}
			label, fl, dl := "none", "-", "-"
			if flooded {
				label, fl, dl = fmt.Sprintf("%d each", cfg.floodConns), strings.Join(flooders, ", "), strconv.FormatInt(dials, 10)
			}
			t.Row(tr, label, strconv.Itoa(cfg.floodTries), strconv.Itoa(ok), rig.Secs(form.quantile(0.5)), rig.Secs(form.max()), vs, fl, dl, fails.String())
			if ok < cfg.floodTries {
				allOK = false
				h.rep.Summarize("flood while forming (%s, flood %s): %d of %d runs formed and completed", tr, label, ok, cfg.floodTries)
			}
		}
	}
	return allOK, perIters.quantile(0.5)
}

// formationResult is one formation try: its verdict, the formation time
// (-1 when it did not form), the time per all-reduce after it (0 when not
// measured), and for a flooded try the listeners flooded (by kind, last
// try's) and the flood's dials.
type formationResult struct {
	o         tryOutcome
	formed    time.Duration
	perIter   time.Duration
	listeners []string
	dials     int64
}

// formationTry runs one formation.
func (h *harness) formationTry(tr string, flooded bool, tag string) (r formationResult) {
	r.formed = -1
	c, err := h.startCluster(clusterSpec{n: 4, transport: tr, args: soakArgs(1<<20, formationIters)})
	if err != nil {
		r.o.reason = err.Error()
		return r
	}
	defer c.ranks.Kill()
	defer func() {
		if !r.o.pass {
			if p := h.saveLog(tag+".log", c.transcript()); p != "" {
				r.o.reason += " (" + p + ")"
			}
		}
	}()
	var f *flooder
	if flooded {
		f = newFlooder(h.cfg.floodConns)
		scanDone := make(chan struct{})
		scanStop := make(chan struct{})
		go func() { // the listeners the ranks open during Join
			defer close(scanDone)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			seen := make(map[string]bool) // TCP listeners' inodes looked at
			for _, a := range c.hosts {
				f.add(target{"tcp", a})
			}
			for {
				// Every 10 ms (the data plane's listeners live only while it
				// connects): the shared-memory sockets, named after the run,
				// and any new TCP listener, flooded when a rank holds it.
				ts, _ := unixNamed(shmPrefix + c.run + "-")
				socks, _ := tcpListening()
				var fresh []listening
				for _, s := range socks {
					if !seen[s.inode] {
						seen[s.inode] = true
						fresh = append(fresh, s)
					}
				}
				if len(fresh) > 0 {
					for _, p := range c.ranks {
						inodes, _ := socketInodes(p.Pid()) // a rank that has exited has none
						for _, s := range fresh {
							if inodes[s.inode] {
								ts = append(ts, s.target)
							}
						}
					}
				}
				for _, t := range ts {
					f.add(t)
				}
				select {
				case <-scanStop:
					return
				case <-tick.C:
				}
			}
		}()
		defer func() {
			close(scanStop)
			<-scanDone
			f.stop()
			r.listeners = describeTargets(f.flooded(), c.hosts)
			r.dials = f.dials.Load()
		}()
	}
	firsts, bad, ok := c.ranks.AwaitAll(joinBound, func(s string) bool { return s == "SOAK 0" })
	if !ok {
		r.o.reason = c.notReached(bad, "forming", joinBound)
		return r
	}
	for _, l := range firsts {
		r.formed = max(r.formed, l.At.Sub(c.started))
	}
	if f != nil {
		f.cancel() // formed: the flood ends (stop, deferred, waits for it)
	}
	if !c.ranks.WaitAll(h.cfg.tryTimeout) {
		r.o.reason = fmt.Sprintf("%s still running %v after forming", c.stillRunning(), h.cfg.tryTimeout)
		return r
	}
	for i, p := range c.ranks {
		if _, code, _ := p.Exited(); code != 0 {
			r.o.reason = fmt.Sprintf("rank %d exit %d: %s", i, code, failureLine(p))
			return r
		}
		if _, ok := p.Find(func(s string) bool { return s == "CHECK soak ok" }); !ok {
			r.o.reason = fmt.Sprintf("rank %d: no CHECK soak ok", i)
			return r
		}
	}
	first, ok1 := c.ranks[0].Find(func(s string) bool { return s == "SOAK 0" })
	last, ok2 := c.ranks[0].Find(func(s string) bool { return s == "SOAK "+strconv.Itoa(formationIters-1) })
	if ok1 && ok2 && !flooded {
		r.perIter = last.At.Sub(first.At) / (formationIters - 1)
	}
	r.o.pass = true
	return r
}

// describeTargets counts the flooded listeners by kind: control (the
// hostfile's ports), other TCP (data listeners), and unix sockets by type.
func describeTargets(ts []target, hosts []string) []string {
	counts := map[string]int{}
	for _, t := range ts {
		kind := t.network
		if t.network == "tcp" {
			kind = "data tcp"
			if slices.Contains(hosts, t.addr) {
				kind = "control"
			}
		}
		counts[kind]++
	}
	var out []string
	for _, k := range []string{"control", "data tcp", "unixpacket", "unix"} {
		if counts[k] > 0 {
			out = append(out, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	return out
}
