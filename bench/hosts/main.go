// Command hosts runs choreo groups across several hosts on one machine:
// each host is a Linux network namespace with its own address, and its
// ranks run in UTS namespaces carrying the host's name (so choreo takes
// them for separate machines: shared memory works only among a host's
// ranks). The hosts meet at a bridge through veth pairs whose rate tc's
// token bucket caps (10 and 25 Gbit/s, say), in both directions, as
// full-duplex NICs on a switch. It runs demo ranks there (`demo node
// bench`, `demo node check matrix`, `demo node check soak`) and prints
// markdown tables: each op and size's p50 and bus bandwidth per group of
// hosts x ranks, rate, transport and topology (the ranks seeing their
// hosts, or each rank a host of its own: two-level against flat
// algorithms over the same links); the check matrix's result; and how
// long every survivor takes to fail with ErrPeerLost after a rank on
// either host is killed.
//
// It needs Linux, root, ip and tc (iproute2), unshare and hostname, and
// says why it skips otherwise (exit 2). It deletes every namespace it
// made when it ends, also on failure and on Ctrl-C or SIGTERM; namespaces
// carry a per-run suffix, and -clean deletes those of a run that was
// killed outright. See README.md.
//
//	go run ./bench/hosts                                 # 2 hosts x 2 ranks at 10 Gbit/s
//	go run ./bench/hosts -ranks 4 -rates 10gbit,25gbit -transports tcp,auto -topology hosts,flat
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// Exit statuses.
const (
	exitOK      = 0 // every target met
	exitMissed  = 1 // a target was not met (wrong elements, a failed group, a slow detection)
	exitCannot  = 2 // the harness could not run, or skipped (not root, no ip or tc)
	exitStopped = 130
)

// harness is one invocation: its configuration, the network of hosts,
// the demo it runs, its scratch and log directories, the progress logger
// (stderr) and the report (the tables, then the summary, on stdout).
type harness struct {
	cfg  *config
	net  *network
	demo string
	tmp  string
	logs string
	log  *zap.SugaredLogger
	rep  *rig.Report
	rng  *rand.Rand
	runs int // groups started, for CHOREO_RUN
}

func main() { rig.Main(parseConfig, run, exitCannot) }

// run runs the experiments cfg names and returns the exit status.
func run(cfg *config, log *zap.SugaredLogger) int {
	if err := preflight(); err != nil {
		log.Warnw("skipped", "why", err)
		return exitCannot
	}
	if cfg.clean {
		gone, err := cleanStale()
		log.Infow("clean", "deleted", gone, "err", err)
		if err != nil {
			return exitCannot
		}
		return exitOK
	}
	tmp, err := os.MkdirTemp("", "choreo-hosts-")
	if err != nil {
		log.Errorw("scratch directory", "err", err)
		return exitCannot
	}
	// The network exists (empty) before the signal handler: an interrupt
	// during its setup deletes what the setup made.
	h := &harness{cfg: cfg, tmp: tmp, log: log, rep: rig.NewReport(os.Stdout), logs: rig.LogsDir(cfg.logs, "choreo-hosts-logs-"),
		net: newNetwork(rig.RandomHex(3), cfg.hosts, log)}
	var seed uint64
	h.rng, seed = rig.NewRand(cfg.seed)
	var once sync.Once
	var interrupted atomic.Bool
	cleanup := func() {
		once.Do(func() {
			kids.Stop()
			h.waitChildren(10 * time.Second)
			if err := h.net.close(); err != nil {
				log.Errorw("deleting the hosts", "err", err)
			}
			_ = os.RemoveAll(tmp)
		})
	}
	defer cleanup()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		interrupted.Store(true) // before the ranks die: run's own return must say so too
		log.Warnw("interrupted: killing the ranks, deleting the hosts", "signal", s.String())
		cleanup()
		_ = log.Sync()
		os.Exit(exitStopped)
	}()
	code := h.runAll(seed)
	if interrupted.Load() {
		// The experiment ended because the interrupt killed its ranks; the
		// exit status is the interrupt's, whichever of the two exits first.
		return exitStopped
	}
	return code
}

// runAll builds the demo, makes the hosts and runs the experiments.
func (h *harness) runAll(seed uint64) int {
	cfg, log := h.cfg, h.log
	if h.demo = cfg.demo; h.demo == "" {
		var err error
		if h.demo, err = rig.BuildDemo(h.tmp, log); err != nil {
			log.Errorw("build", "err", err)
			return exitCannot
		}
	} else if abs, err := filepath.Abs(h.demo); err != nil || !rig.Executable(abs) {
		log.Errorw("-demo is not an executable", "path", h.demo)
		return exitCannot
	} else {
		h.demo = abs
	}
	if err := h.net.setup(); err != nil {
		log.Errorw("making the hosts", "err", err)
		return exitCannot
	}
	log.Infow("hosts", "seed", seed, "hosts", cfg.hosts, "ranks per host", cfg.perHost, "rates", fmt.Sprint(cfg.rates),
		"variants", len(cfg.variants()), "failed groups' output", h.logs)
	t0 := time.Now()
	missed := false
	for _, e := range []struct {
		name string
		run  func() (bool, error)
	}{{"bench", h.benchExperiment}, {"matrix", h.matrixExperiment}, {"kill", h.killExperiment}} {
		if !cfg.wants(e.name) {
			continue
		}
		ok, err := e.run()
		if err != nil {
			log.Errorw(e.name, "err", err)
			return exitCannot
		}
		missed = missed || !ok
	}
	h.rep.WriteSummary(fmt.Sprintf("Summary (%d hosts, seed %d, %s)", cfg.hosts, seed, time.Since(t0).Round(time.Second)), "")
	if missed {
		return exitMissed
	}
	return exitOK
}

// waitChildren waits up to d for every child to be reaped (a namespace
// with a process in it outlives its deletion until the process exits).
func (h *harness) waitChildren(d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if kids.Len() == 0 {
			return
		}
	}
}

// intn is a random int in [0, n).
func (h *harness) intn(n int) int { return h.rng.IntN(n) }

// saveLog writes text to the log directory as name and returns its path
// ("" when it could not be written; the reason is logged).
func (h *harness) saveLog(name, text string) string {
	path, err := rig.SaveLog(h.logs, name, text)
	if err != nil {
		h.log.Warnw("cannot keep a group's output", "err", err)
	}
	return path
}
