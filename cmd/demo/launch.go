package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	choreolaunch "github.com/choreo-gpu/choreo/launch"
	"github.com/choreo-gpu/choreo/metrics"
)

// launchCmd starts a local cluster: n copies of this executable, each
// `demo node <args>` with one rank, which join over loopback, launched by
// package launch (as choreorun does). Their output comes back line by
// line, led by "[rank] ". When a rank fails the launcher stops the others
// and names it in one line; on Ctrl-C it stops them all; no rank outlives
// it.
type launchCmd struct {
	N        int           `short:"n" help:"Ranks: processes to start." default:"4"`
	Secret   string        `help:"The ranks' shared secret (at least 16 bytes, used as given); default: 32 random bytes in hex." env:"CHOREO_SECRET"`
	Grace    time.Duration `help:"How long a rank that is asked to stop may take before it is killed." default:"3s"`
	Deadline time.Duration `help:"Stop every rank after this long; 0: no limit." default:"0"`
	Args     []string      `arg:"" optional:"" passthrough:"" help:"Each rank's subcommand (run or bench) and its flags; default: run."`
	obsFlags
}

// Run launches `demo node <args>` on c.N ranks.
func (c *launchCmd) Run(g *globals) error {
	args := c.Args
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		args = append([]string{"run"}, args...)
	}
	args, err := liftObsFlags(args, &c.obsFlags)
	if err != nil {
		return err
	}
	return launchNodes(g, c.N, args, launchSpec{secret: c.Secret, grace: c.Grace, deadline: c.Deadline, obs: c.obsFlags,
		elastic: elasticArgs(args)})
}

// launchNodes checks `demo node <args>` here, once, then launches it on n
// ranks of this executable with sp's settings (its output on this
// process's unless sp names others).
func launchNodes(g *globals, n int, args []string, sp launchSpec) error {
	argv := append([]string{"node"}, args...)
	if helped, err := checkArgs(argv, os.Stdout); err != nil || helped {
		if err != nil {
			err = fmt.Errorf("launch: %w", err)
		}
		return err
	}
	if g.Verbose {
		argv = append([]string{"--verbose"}, argv...)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	sp.n, sp.exe, sp.argv = n, exe, argv
	if sp.stdout == nil {
		sp.stdout = os.Stdout
	}
	if sp.stderr == nil {
		sp.stderr = os.Stderr
	}
	return launch(sp)
}

// checkArgs parses a rank's command line without running it, so that a
// bad flag is reported once rather than by every rank, and help is
// written to help once (helped) rather than by every rank.
func checkArgs(argv []string, help io.Writer) (helped bool, err error) {
	var c cli
	p, err := kong.New(&c, kong.Name("demo"), kong.Writers(help, io.Discard),
		kong.Exit(func(int) { helped = true }))
	if err != nil {
		return false, err
	}
	_, err = p.Parse(argv)
	return helped, err
}

// launchSpec is one launch: n ranks, each exe with argv.
type launchSpec struct {
	n              int
	exe            string
	argv           []string
	secret         string        // default: 32 random bytes in hex
	grace          time.Duration // SIGTERM to SIGKILL; default 3 s
	deadline       time.Duration // 0: none
	env            []string      // more variables for every rank
	stdout, stderr io.Writer
	sigs           <-chan os.Signal // nil: SIGINT and SIGTERM to this process
	started        func(pids []int) // if set, called once every rank has started
	obs            obsFlags         // a merged trace of the ranks' parts; their metrics endpoints
	elastic        bool             // the ranks go on without a lost rank (launch.Spec.Elastic)
}

// launch runs one launch to its end with package launch: n ranks on this
// host, each told its rank, the world size, rank 0's address (a port
// chosen by the launcher; the others bind their own), the secret and the
// run; their lines led by "[rank] "; a rank that exits exitPeerLost gives
// the rank that failed first a moment to show itself.
func launch(sp launchSpec) error {
	if sp.n < 1 {
		return fmt.Errorf("launch: -n must be >= 1, got %d", sp.n)
	}
	obsEnv, merge, err := sp.observe()
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	defer merge()
	err = choreolaunch.Run(choreolaunch.Spec{
		Argv: append([]string{sp.exe}, sp.argv...), NProcPerNode: sp.n, Secret: sp.secret, Env: sp.env,
		RankEnv: obsEnv, TagOutput: true, Grace: sp.grace, Deadline: sp.deadline, PeerLostExit: exitPeerLost,
		Stdout: sp.stdout, Stderr: sp.stderr, Signals: sp.sigs, Started: sp.started, Elastic: sp.elastic,
		Lost: func(l choreolaunch.Loss) { fmt.Fprintln(sp.stderr, "demo: launch:", l) }})
	var ee *choreolaunch.ExitError
	if errors.As(err, &ee) {
		return &exitError{ee.Code, fmt.Errorf("launch: %w", err)}
	}
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	return nil
}

// observe prepares what sp.obs asks of the ranks: a directory for their
// trace parts, merged into sp.obs.Trace by merge once they have ended
// (whatever their outcome: a failed run's trace is the one to look at),
// and each rank's metrics address. env is each rank's variables for them.
func (sp *launchSpec) observe() (env func(rank int) []string, merge func(), err error) {
	var dir string
	if sp.obs.Trace != "" {
		if dir, err = os.MkdirTemp("", "choreo-trace-"); err != nil {
			return nil, nil, err
		}
	}
	if sp.obs.Metrics != "" {
		if _, err := rankMetricsAddr(sp.obs.Metrics, 0); err != nil {
			return nil, nil, err
		}
	}
	env = func(rank int) []string {
		var e []string
		if dir != "" {
			e = append(e, envTraceDir+"="+dir)
		}
		if sp.obs.Metrics != "" {
			addr, _ := rankMetricsAddr(sp.obs.Metrics, rank)
			e = append(e, metrics.EnvAddr+"="+addr)
		}
		return e
	}
	merge = func() {
		if dir == "" {
			return
		}
		if err := mergeParts(dir, sp.obs.Trace, sp.n); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
		} else {
			fmt.Fprintf(sp.stdout, "trace: %s (open it in ui.perfetto.dev)\n", sp.obs.Trace)
		}
		_ = os.RemoveAll(dir)
	}
	return env, merge, nil
}

// rankProcs is the GOMAXPROCS each of n ranks gets on a host of cpus
// processors, as environment entries (launch.GoMaxProcs).
func rankProcs(n, cpus int, set string) []string { return choreolaunch.GoMaxProcs(n, cpus, set) }
