package main

import (
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// fdSlack is how many more descriptors than before an attack the rank may
// hold 5 s after it and still count as back to its baseline (its own
// connections come and go).
const fdSlack = 4

// attackRun is one attack on a running cluster: start builds the attack
// against addr and returns what it holds (for the row) and a release
// function; the harness samples the attacked rank from before start to
// 5 s after release.
type attackRun struct {
	name   string
	target time.Duration // how long the cluster's soak should last
	start  func(addr string) (held string, release func() string)
}

// attacks runs each attack on a fresh 4-rank cluster of the first
// transport, a soak sized (from perIter, the time per 1 MiB all-reduce
// measured while forming) to outlast it.
func (h *harness) attacks(perIter time.Duration) bool {
	cfg := h.cfg
	t := h.rep.Table(fmt.Sprintf("strangers on a running cluster: rank %d's control port, 4 ranks over %s (target: RSS growth < 64 MiB, fds back to baseline 5 s after, the run completes)", cfg.attackRank, cfg.transports[0]),
		"attack", "held", "server side", "RSS before", "RSS peak during", "RSS 5 s after", "fds before", "fds peak during", "fds 5 s after", "run completed")
	if perIter <= 0 {
		perIter = 20 * time.Millisecond
	}
	silent := h.silentBudget()
	runs := []attackRun{
		{"HTTP/2 streams", 40 * time.Second, func(addr string) (string, func() string) {
			return h2Attack(addr, cfg.streams, cfg.streamsPerConn)
		}},
		{"silent connections", 60 * time.Second, func(addr string) (string, func() string) {
			return silentAttack(addr, silent)
		}},
	}
	allOK := true
	for _, a := range runs {
		iters := int(min(max(a.target/perIter, 500), 200000))
		row, ok := h.attackTry(a, iters)
		t.Row(row...)
		if !ok {
			allOK = false
		}
	}
	return allOK
}

// silentBudget is how many silent connections the harness can hold: the
// configured count, less where RLIMIT_NOFILE (raised to its hard limit)
// leaves too few descriptors.
func (h *harness) silentBudget() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return h.cfg.silent
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	const spare = 512
	if int(rl.Cur) < h.cfg.silent+spare {
		h.log.Warnw("RLIMIT_NOFILE is too low for the silent connections asked for: fewer are held (raise ulimit -n)",
			"asked", h.cfg.silent, "limit", rl.Cur)
		return max(0, int(rl.Cur)-spare)
	}
	return h.cfg.silent
}

// attackTry runs one attack on a fresh cluster and returns its row and
// whether its targets were met.
func (h *harness) attackTry(a attackRun, iters int) ([]string, bool) {
	cfg := h.cfg
	tag := "attack-" + a.name
	c, err := h.startCluster(clusterSpec{n: 4, transport: cfg.transports[0], args: soakArgs(1<<20, iters)})
	if err != nil {
		return []string{a.name, "-", err.Error()}, false
	}
	defer c.ranks.Kill()
	if _, bad, ok := c.ranks.AwaitAll(joinBound, func(s string) bool { return s == "SOAK 0" }); !ok {
		p := h.saveLog(tag+".log", c.transcript())
		return []string{a.name, "-", fmt.Sprintf("%s (%s)", c.notReached(bad, "forming", joinBound), p)}, false
	}
	time.Sleep(2 * time.Second)
	pid := c.ranks[cfg.attackRank].Pid()
	before := usageOf(pid)

	var mu sync.Mutex
	peak := before
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				u := usageOf(pid)
				mu.Lock()
				peak = peak.peak(u)
				mu.Unlock()
			}
		}
	}()
	h.log.Infow("attack", "attack", a.name, "rank", cfg.attackRank, "addr", c.hosts[cfg.attackRank], "soak iters", iters)
	held, release := a.start(c.hosts[cfg.attackRank])
	time.Sleep(cfg.hold)
	server := release()
	close(stopSampling)
	<-sampled
	time.Sleep(5 * time.Second)
	after := usageOf(pid)

	completed := "yes"
	ok := true
	if !c.ranks.WaitAll(cfg.tryTimeout + 3*a.target) {
		completed, ok = fmt.Sprintf("no: %s still running", c.stillRunning()), false
	} else {
		for i, p := range c.ranks {
			_, code, _ := p.Exited()
			_, soaked := p.Find(func(s string) bool { return s == "CHECK soak ok" })
			if code != 0 || !soaked {
				completed, ok = fmt.Sprintf("no: rank %d exit %d: %s", i, code, failureLine(p)), false
				break
			}
		}
	}
	if !ok {
		if p := h.saveLog(tag+".log", c.transcript()); p != "" {
			completed += " (" + p + ")"
		}
	}
	growth := peak.rss - before.rss
	if growth >= 64<<20 || after.fds > before.fds+fdSlack || after.rss < 0 {
		ok = false
	}
	h.rep.Summarize("%s on rank %d: RSS %s -> peak %s -> %s after 5 s; fds %d -> peak %d -> %d; run completed: %s",
		a.name, cfg.attackRank, rig.MiB(before.rss), rig.MiB(peak.rss), rig.MiB(after.rss), before.fds, peak.fds, after.fds, completed)
	return []string{a.name, held, server, rig.MiB(before.rss), rig.MiB(peak.rss), rig.MiB(after.rss),
		strconv.Itoa(before.fds), strconv.Itoa(peak.fds), strconv.Itoa(after.fds), completed}, ok
}
