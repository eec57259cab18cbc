package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/metrics"
)

// launchCmd starts a local cluster: n copies of this executable, each
// `demo node <args>` with one rank, which join over loopback. Their output
// comes back line by line, led by "[rank] ". When a rank fails the launcher
// stops the others and names it; on Ctrl-C it stops them all; no rank
// outlives it.
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
	return launchNodes(g, c.N, args, launchSpec{secret: c.Secret, grace: c.Grace, deadline: c.Deadline, obs: c.obsFlags})
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
}

// launch runs one launch to its end: picks n free loopback ports, writes
// the hostfile (removed at the end), starts the ranks with CHOREO_RANK,
// CHOREO_LOCAL_RANK (the same: every rank is on this host; the CUDA
// backend picks its GPU by it), CHOREO_WORLD_SIZE, CHOREO_HOSTFILE,
// CHOREO_SECRET and CHOREO_RUN set, and supervises them.
func launch(sp launchSpec) error {
	if sp.n < 1 {
		return fmt.Errorf("launch: -n must be >= 1, got %d", sp.n)
	}
	if sp.grace <= 0 {
		sp.grace = 3 * time.Second
	}
	if sp.secret == "" {
		sp.secret = randomHex(32)
	}
	if len(sp.secret) < 16 {
		return fmt.Errorf("launch: the secret must be at least 16 bytes, got %d", len(sp.secret))
	}
	hostfile, err := writeHostfile(sp.n)
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	defer func() { _ = os.Remove(hostfile) }()
	if sp.sigs == nil {
		ch := make(chan os.Signal, 2)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(ch)
		sp.sigs = ch
	}
	run := "demo-" + randomHex(8)
	procs := rankProcs(sp.n, runtime.NumCPU(), os.Getenv("GOMAXPROCS"))
	obsEnv, merge, err := sp.observe()
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	defer merge()
	env := func(rank int) []string {
		return append(append(append([]string{
			collectives.EnvRank + "=" + strconv.Itoa(rank),
			collectives.EnvLocalRank + "=" + strconv.Itoa(rank),
			collectives.EnvWorldSize + "=" + strconv.Itoa(sp.n),
			collectives.EnvHostfile + "=" + hostfile,
			collectives.EnvSecret + "=" + sp.secret,
			collectives.EnvRun + "=" + run,
		}, procs...), obsEnv(rank)...), sp.env...)
	}
	c, err := startCluster(sp.n, sp.exe, sp.argv, env, sp.stdout, sp.stderr, sp.grace)
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if sp.started != nil {
		sp.started(c.pids())
	}
	var deadline <-chan time.Time
	if sp.deadline > 0 {
		t := time.NewTimer(sp.deadline)
		defer t.Stop()
		deadline = t.C
	}
	if err := c.supervise(sp.sigs, deadline); err != nil {
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
// processors, as environment entries: the processors shared out, at least
// one each, as torchrun sets OMP_NUM_THREADS=1 for its ranks. Each rank's
// Go runtime would otherwise run as many threads as the host has
// processors, and a rank's wake-ups (a message in, a fence raised) would
// wake idle threads whose spinning takes the processors its peers need:
// on 2 cores, 2 ranks of GOMAXPROCS 1 all-reduce 4 KiB in about 60% of the
// time that ranks of GOMAXPROCS 2 take. None where the user set GOMAXPROCS
// (set, the ranks inherit it).
func rankProcs(n, cpus int, set string) []string {
	if set != "" || n < 1 {
		return nil
	}
	return []string{"GOMAXPROCS=" + strconv.Itoa(max(1, cpus/n))}
}

// writeHostfile picks n free ports on 127.0.0.1 (all held open until every
// one is picked, so they differ) and writes them, as a JSON list of
// "host:port" indexed by rank, to a new temporary file.
func writeHostfile(n int) (string, error) {
	hosts := make([]string, n)
	for i := range hosts {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("free port: %w", err)
		}
		defer func() { _ = l.Close() }()
		hosts[i] = l.Addr().String()
	}
	b, err := json.Marshal(hosts)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "choreo-hosts-*.json")
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
