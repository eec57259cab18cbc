package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// experiments are the harness's experiments, in the order they run.
var experiments = []string{"bench", "matrix", "kill"}

// config is the harness's command line.
type config struct {
	only       []string
	hosts      int
	perHost    []int
	rates      []rate
	transports []string
	topologies []string
	algoEnv    string
	algos      []string
	env        []string
	burst      time.Duration
	timeout    time.Duration
	backend    string
	demo       string
	logs       string
	clean      bool
	seed       uint64

	// bench
	ops   string
	sizes string
	iters int

	// kill
	killTries  int
	killWithin time.Duration
	killSize   string
}

// parseConfig reads args.
func parseConfig(args []string) (*config, error) {
	c := &config{}
	fs, common := rig.NewFlagSet("hosts", experiments, "", "failed groups", "the kill experiment's random choices")
	fs.IntVar(&c.hosts, "hosts", 2, "hosts (network namespaces)")
	perHost := fs.String("ranks", "2", "ranks per host, comma-separated: each count is a group of hosts x count ranks")
	rates := fs.String("rates", "10gbit", "link rates, comma-separated (tc's spelling: 10gbit, 25gbit, 500mbit; off: no cap); bench runs at each, matrix and kill at the first")
	transports := fs.String("transports", "tcp,auto", "CHOREO_TRANSPORT of the groups, comma-separated: tcp, shm, auto, or - to leave it unset")
	topos := fs.String("topology", "hosts,flat", "how the groups see their hosts, comma-separated: hosts (as they are: two-level algorithms, shared memory inside a host under auto), flat (each rank a host of its own through CHOREO_HOST_ID: the flat algorithms, TCP for every pair)")
	fs.StringVar(&c.algoEnv, "algo-env", "", "an environment variable that forces the collectives' algorithm; with -algos, every group runs once per value")
	algos := fs.String("algos", "", "values of -algo-env, comma-separated (each a variant of every group)")
	fs.Func("env", "NAME=VALUE added to every rank's environment (repeatable; the harness's own environment is passed on too)", func(s string) error {
		if name, _, ok := strings.Cut(s, "="); !ok || name == "" {
			return fmt.Errorf("want NAME=VALUE, got %q", s)
		}
		c.env = append(c.env, s)
		return nil
	})
	fs.DurationVar(&c.burst, "burst", time.Millisecond, "the shaper's token bucket, in time at the rate (tbf burst = rate x this, at least 256 KiB)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "bound on one group's run")
	fs.StringVar(&c.backend, "backend", "sim", "the ranks' GPU backend (demo's --backend)")
	fs.BoolVar(&c.clean, "clean", false, "delete the namespaces an earlier, killed run left (no process in them), then exit")

	fs.StringVar(&c.ops, "ops", "allreduce", "bench: ops (demo bench's --ops)")
	fs.StringVar(&c.sizes, "sizes", "1MiB,64MiB", "bench: bytes per rank (demo bench's --sizes)")
	fs.IntVar(&c.iters, "iters", 0, "bench: timed iterations per size (0: demo bench's, by size)")

	fs.IntVar(&c.killTries, "kill-tries", 4, "kill: tries per group; the victim's host alternates")
	fs.DurationVar(&c.killWithin, "kill-within", time.Second, "kill: bound on each survivor's ErrPeerLost after the kill")
	fs.StringVar(&c.killSize, "kill-size", "64MiB", "kill: bytes per all-reduce of the soak the kill lands in")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("hosts: unexpected arguments %q", fs.Args())
	}
	c.demo, c.logs, c.seed = common.Demo, common.Logs, common.Seed
	if err := c.read(common.Only, *perHost, *rates, *transports, *algos); err != nil {
		return nil, err
	}
	var err error
	if c.topologies, err = rig.Names(*topos, topologies); err != nil {
		return nil, fmt.Errorf("hosts: %w", err)
	}
	return c, nil
}

// read checks and converts the list flags.
func (c *config) read(only, perHost, rates, transports, algos string) error {
	var err error
	if c.only, err = rig.Names(only, experiments); err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	if c.transports, err = rig.Names(transports, []string{"tcp", "shm", "auto", "-"}); err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	for _, s := range rig.Split(perHost) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 64 {
			return fmt.Errorf("hosts: -ranks: %q is not a count of 1 to 64", s)
		}
		c.perHost = append(c.perHost, n)
	}
	for _, s := range rig.Split(rates) {
		r, err := parseRate(s)
		if err != nil {
			return err
		}
		c.rates = append(c.rates, r)
	}
	c.algos = rig.Split(algos)
	switch {
	case c.hosts < 1 || c.hosts > 250:
		return fmt.Errorf("hosts: -hosts %d: want 1 to 250", c.hosts)
	case len(c.perHost) == 0 || len(c.rates) == 0:
		return fmt.Errorf("hosts: -ranks and -rates need at least one value")
	case len(c.algos) > 0 && c.algoEnv == "":
		return fmt.Errorf("hosts: -algos needs -algo-env (the variable that forces the algorithm)")
	case c.killTries < 1 || c.killWithin <= 0 || c.timeout <= 0:
		return fmt.Errorf("hosts: -kill-tries, -kill-within and -timeout must be positive")
	}
	return nil
}

// wants reports whether experiment name is to run.
func (c *config) wants(name string) bool { return slices.Contains(c.only, name) }

// topologies are the ways a group may see its hosts: "hosts", each
// rank's own host identity (its host's ranks form one host of the
// group's topology: the collectives may run in two levels, and auto
// links a host's ranks by shared memory); "flat", every rank told it is a
// host of its own (CHOREO_HOST_ID), so the group runs the flat algorithms
// and auto links every pair by TCP, over the same capped links.
var topologies = []string{"hosts", "flat"}

// variant is one way to run a group: its CHOREO_TRANSPORT, whether the
// ranks see one host per rank (flat), and, where -algo-env is given, the
// value of that variable.
type variant struct {
	transport string
	flat      bool
	algo      string
}

// spec is the variant's group of per ranks on each host running args.
func (v variant) spec(per int, algoEnv string, args []string) clusterSpec {
	s := clusterSpec{perHost: per, transport: v.transport, flat: v.flat, args: args}
	if v.algo != "" {
		s.env = []string{algoEnv + "=" + v.algo}
	}
	return s
}

// asked is the transport as the tables show it.
func (v variant) asked() string {
	if v.transport == "" {
		return "(unset)"
	}
	return v.transport
}

// topology is the variant's topology as the tables show it.
func (v variant) topology() string {
	if v.flat {
		return "flat"
	}
	return "hosts"
}

// tag names the variant in file names.
func (v variant) tag() string {
	t := v.asked() + "-" + v.topology()
	if v.algo != "" {
		t += "-" + v.algo
	}
	return t
}

// variantCols are the tables' columns that name a variant.
func (c *config) variantCols() []string {
	cols := []string{"CHOREO_TRANSPORT", "topology"}
	if c.algoEnv != "" {
		cols = append(cols, c.algoEnv)
	}
	return cols
}

// cells are v's cells under variantCols.
func (c *config) cells(v variant) []string {
	cells := []string{v.asked(), v.topology()}
	if c.algoEnv != "" {
		cells = append(cells, v.algo)
	}
	return cells
}

// variants is every transport, times every topology, times every
// algorithm value when there are some.
func (c *config) variants() []variant {
	algos := c.algos
	if len(algos) == 0 {
		algos = []string{""}
	}
	var out []variant
	for _, t := range c.transports {
		if t == "-" {
			t = ""
		}
		for _, topo := range c.topologies {
			for _, a := range algos {
				out = append(out, variant{transport: t, flat: topo == "flat", algo: a})
			}
		}
	}
	return out
}
