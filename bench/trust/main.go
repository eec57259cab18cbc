// Command trust measures whether a cluster of choreo processes can be
// trusted under load: it builds the demo once, then runs experiments,
// each a number of tries, each try a fresh cluster of demo processes on
// loopback that it starts itself as ranks (so it knows their pids and
// reads their output with timestamps): a rank paused and resumed, a rank
// paused past the peer timeout, a rank killed in a 64 MiB soak, the
// check matrix beside busy CPU loops, and floods of silent connections and
// HTTP/2 streams. It prints one markdown table per experiment, a row as
// each cell completes, then a summary. See README.md.
//
//	go run ./bench/trust                      # every experiment, default tries
//	go run ./bench/trust -only pause -tries 1 -pauses 3s -ranks 3 -transports tcp
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// harness is one invocation: the demo it runs, its scratch directory, the
// directory that keeps failed tries' output, its logger (progress on
// stderr) and its report (the tables, then the summary, on stdout).
type harness struct {
	cfg   *config
	demo  string
	tmp   string
	logs  string
	log   *zap.SugaredLogger
	rep   *rig.Report
	rng   *rand.Rand
	rngMu sync.Mutex
}

func main() { rig.Main(parseConfig, run, 2) }

// run runs the experiments cfg names and returns the exit status: 0 when
// every try passed, 1 when one failed, 2 when the harness could not run.
func run(cfg *config, log *zap.SugaredLogger) int {
	tmp, err := os.MkdirTemp("", "choreo-trust-")
	if err != nil {
		log.Errorw("scratch directory", "err", err)
		return 2
	}
	h := &harness{cfg: cfg, tmp: tmp, log: log, rep: rig.NewReport(os.Stdout), logs: rig.LogsDir(cfg.logs, "choreo-trust-logs-")}
	var seed uint64
	h.rng, seed = rig.NewRand(cfg.seed)
	cleanup := func() {
		kids.KillAll()
		_ = os.RemoveAll(tmp)
	}
	defer cleanup()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		log.Warnw("interrupted: killing every child", "signal", s.String())
		cleanup()
		_ = log.Sync()
		os.Exit(130)
	}()

	if h.demo = cfg.demo; h.demo == "" {
		if h.demo, err = rig.BuildDemo(tmp, log); err != nil {
			log.Errorw("build", "err", err)
			return 2
		}
	} else if !rig.Executable(h.demo) {
		log.Errorw("-demo is not an executable", "path", h.demo)
		return 2
	}
	log.Infow("trust", "seed", seed, "experiments", cfg.only, "failed tries' output", h.logs)
	t0 := time.Now()
	failed := false
	for _, e := range []struct {
		name string
		run  func() bool
	}{
		{"pause", h.pauseExperiment}, {"longpause", h.longPauseExperiment}, {"kill", h.killExperiment},
		{"matrix", h.matrixExperiment}, {"flood", h.floodExperiment},
	} {
		if cfg.wants(e.name) {
			if !e.run() {
				failed = true
			}
		}
	}
	after := ""
	if _, err := os.Stat(h.logs); err == nil {
		after = fmt.Sprintf("\nFailed tries' output: %s\n", h.logs)
	}
	h.rep.WriteSummary(fmt.Sprintf("Summary (seed %d, %s)", seed, time.Since(t0).Round(time.Second)), after)
	if failed {
		return 1
	}
	return 0
}

// intn is a random int in [0, n).
func (h *harness) intn(n int) int {
	h.rngMu.Lock()
	defer h.rngMu.Unlock()
	return h.rng.IntN(n)
}
