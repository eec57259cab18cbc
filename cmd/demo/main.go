// Command demo is choreo's demo, benchmark driver and launcher. By default
// its ranks are processes: `demo` is `demo launch -n 4 run`, a local
// cluster of 4 processes of this executable, each one rank (`demo node`),
// joined over protoactor remoting (control) and TCP (data) on loopback.
//
//	demo                   # 4 processes all-reduce gradients (training-like loop), one summary
//	demo run --ranks 8 --steps 200 --size 4MiB --dtype bfloat16 --backend sim
//	demo run --inproc      # the same loop, every rank in this process (collectives.Local)
//	demo run --elastic --kill-rank 2   # a soak in which rank 2 dies and the others shrink their group and go on
//	demo bench             # nccl-tests style sweep of every collective, with a memcpy line
//	demo bench --inproc
//	demo launch -n 2 bench --ops allreduce,sendrecv
//	demo node run          # one rank, joined from the environment (demo launch, torchrun, mpirun, srun)
//
// The launcher leads each rank's output lines with "[rank] ", stops the
// other ranks when one fails and names it, and leaves no rank behind on
// Ctrl-C. Rank 0 prints as it goes: each bench row once measured, a
// progress line now and then in a long run; a failed collective is
// reported once, as a block by rank 0 (or the process holding every rank)
// and in one line by each other rank. --trace FILE is written however the
// run ends: each rank saves its part on SIGINT or SIGTERM, and the
// launcher merges the parts that exist. run, bench and their ranks
// (launch ... run) take the same flags; -n is also -np; a command line
// the demo refuses is one line and a hint, exit status 2. The command line is parsed with github.com/alecthomas/kong, sizes
// with github.com/dustin/go-humanize, the progress bar is
// github.com/schollz/progressbar; all logging goes through zap.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/alecthomas/kong"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/cluster"
	_ "github.com/choreo-gpu/choreo/gpu/cuda"  // "cuda" where an NVIDIA driver is found
	_ "github.com/choreo-gpu/choreo/gpu/metal" // "metal" on macOS
	_ "github.com/choreo-gpu/choreo/gpu/sim"   // the embedded default (world.go names it too)
)

// cli is the command line.
type cli struct {
	Verbose bool      `help:"Log runtime events to stderr." short:"v"`
	Run     runCmd    `cmd:"" default:"withargs" help:"Training-like loop: fill gradients, all-reduce, scale, check (the default)."`
	Bench   benchCmd  `cmd:"" help:"Sweep every collective over sizes, nccl-tests style, with a memcpy reference."`
	Launch  launchCmd `cmd:"" help:"Start a local cluster: N processes of this program, one rank each, running 'demo node <subcommand>'."`
	Node    nodeCmd   `cmd:"" help:"Be one rank of a cluster, joined from the environment (demo launch, torchrun, mpirun, srun)."`
	Trace   traceCmd  `cmd:"" help:"Work with the timelines that --trace writes."`
}

// globals is what every command gets: the flags above its own and the
// logger they chose.
type globals struct {
	Verbose bool
	log     *zap.Logger
}

func main() {
	var c cli
	ctx, code, ok := parseArgs(&c, os.Args[1:], os.Stdout, os.Stderr)
	if !ok {
		os.Exit(code)
	}
	g := &globals{Verbose: c.Verbose, log: zap.NewNop()}
	if c.Verbose {
		cfg := zap.NewDevelopmentConfig()
		cfg.Level = zap.NewAtomicLevelAt(zapcore.InfoLevel)
		cfg.DisableStacktrace = true // the remoting's errors at shutdown are expected; a line each is enough
		var err error
		if g.log, err = cfg.Build(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: logger:", err)
			os.Exit(1)
		}
	}
	err := ctx.Run(g)
	_ = g.log.Sync()
	var pe *kong.ParseError
	if errors.As(err, &pe) { // a rank's command line, checked by launch
		usageError(os.Stderr, err, parsedPath(pe))
		os.Exit(exitUsage)
	}
	if err != nil {
		printFailure(os.Stderr, err, leads(ctx.Command()))
		os.Exit(exitCode(err))
	}
}

// leads reports whether the process that ran command prints a failed
// collective's whole report: it holds every rank, or it is rank 0 of a
// launch (cluster.FromEnv).
func leads(command string) bool {
	return !strings.HasPrefix(command, "node ") || cluster.FromEnv().Rank == 0
}

// exitCode is the status the demo exits with after err: the launcher's
// own, exitPeerLost when a rank failed because another was lost (so that
// its launcher looks for the rank that failed first), else 1.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, collectives.ErrPeerLost):
		return exitPeerLost
	}
	return 1
}
