package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// experiments are the harness's experiments, in the order they run;
// "flood" is its two parts, which -only may also name alone.
var experiments = []string{"pause", "longpause", "kill", "matrix", "flood"}

// floodParts are the parts of the flood experiment.
var floodParts = []string{"formation", "attacks"}

// config is the harness's command line.
type config struct {
	only       []string
	ranks      []int
	transports []string
	demo       string
	logs       string
	seed       uint64
	tryTimeout time.Duration

	// pause
	tries  int
	pauses []time.Duration
	steps  int
	warmup time.Duration

	// longpause
	longTries    int
	longPause    time.Duration
	peerTimeout  time.Duration
	detectWithin time.Duration

	// kill
	killTries  int
	killWithin time.Duration

	// matrix
	matrixRuns       int
	matrixTransports []string
	busyLoops        int

	// flood
	floodTries     int
	floodConns     int
	streams        int
	streamsPerConn int
	silent         int
	hold           time.Duration
	attackRank     int
}

// parseConfig reads args.
func parseConfig(args []string) (*config, error) {
	c := &config{}
	fs, common := rig.NewFlagSet("trust", experiments, " (or the flood's parts alone: "+strings.Join(floodParts, ", ")+")",
		"failed tries", "the random choices (victim ranks, kill moments)")
	ranks := fs.String("ranks", "3,4", "rank counts of the pause, long-pause and kill experiments")
	transports := fs.String("transports", "tcp,shm", "data planes (CHOREO_TRANSPORT) of the pause, long-pause and kill experiments; the first is the flood attacks'")
	fs.DurationVar(&c.tryTimeout, "try-timeout", 3*time.Minute, "bound on one try's run after its disturbance")

	fs.IntVar(&c.tries, "tries", 10, "pause: tries per cell")
	pauses := fs.String("pauses", "1s,3s,8s", "pause: pause lengths")
	fs.IntVar(&c.steps, "steps", 800, "pause and long pause: steps of `demo node run` (1 MiB each; ~15-20 s unloaded on 2 cores)")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "pause and long pause: running time before the pause")

	fs.IntVar(&c.longTries, "long-tries", 3, "long pause: tries per cell")
	fs.DurationVar(&c.longPause, "long-pause", 20*time.Second, "long pause: pause length")
	fs.DurationVar(&c.peerTimeout, "peer-timeout", 10*time.Second, "long pause: CHOREO_PEER_TIMEOUT")
	fs.DurationVar(&c.detectWithin, "detect-within", 11*time.Second, "long pause: bound on each other rank's ErrPeerLost after the pause starts")

	fs.IntVar(&c.killTries, "kill-tries", 20, "kill: tries per cell")
	fs.DurationVar(&c.killWithin, "kill-within", time.Second, "kill: bound on each survivor's ErrPeerLost after the kill")

	fs.IntVar(&c.matrixRuns, "matrix-runs", 30, "matrix: runs of `demo launch -n 4 check matrix` per transport")
	matrixTr := fs.String("matrix-transports", "auto", "matrix: CHOREO_TRANSPORT of the runs (auto is what the README's commands use)")
	fs.IntVar(&c.busyLoops, "busy", 2, "matrix: busy CPU loops beside the runs")

	fs.IntVar(&c.floodTries, "flood-tries", 3, "flood: formations per transport, flooded and not")
	fs.IntVar(&c.floodConns, "flood-conns", 300, "flood: silent connections held on each listener while the cluster forms")
	fs.IntVar(&c.streams, "streams", 1000, "flood: HTTP/2 streams claiming 16 MiB bodies against the running cluster")
	fs.IntVar(&c.streamsPerConn, "streams-per-conn", 100, "flood: HTTP/2 streams per connection")
	fs.IntVar(&c.silent, "silent", 15000, "flood: silent connections against the running cluster's control port")
	fs.DurationVar(&c.hold, "hold", 5*time.Second, "flood: how long an attack is held once in place")
	fs.IntVar(&c.attackRank, "attack-rank", 1, "flood: the rank whose control port is attacked")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("trust: unexpected arguments %q", fs.Args())
	}
	c.demo, c.logs, c.seed = common.Demo, common.Logs, common.Seed
	var err error
	if c.only, err = rig.Names(common.Only, append(slices.Clone(experiments), floodParts...)); err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	if c.transports, err = rig.Names(*transports, []string{"tcp", "shm", "auto"}); err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	if c.matrixTransports, err = rig.Names(*matrixTr, []string{"tcp", "shm", "auto"}); err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	for _, s := range rig.Split(*ranks) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			return nil, fmt.Errorf("trust: -ranks: %q is not a rank count of 2 or more", s)
		}
		c.ranks = append(c.ranks, n)
	}
	for _, s := range rig.Split(*pauses) {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("trust: -pauses: %q is not a positive duration", s)
		}
		c.pauses = append(c.pauses, d)
	}
	if c.attackRank < 0 || c.attackRank > 3 {
		return nil, fmt.Errorf("trust: -attack-rank must be 0..3 (the flood cluster has 4 ranks), got %d", c.attackRank)
	}
	if c.streamsPerConn < 1 || c.floodConns < 0 || c.silent < 0 || c.streams < 0 {
		return nil, fmt.Errorf("trust: -streams-per-conn must be >= 1 and the flood counts >= 0")
	}
	return c, nil
}

// wants reports whether experiment (or flood part) name is to run.
func (c *config) wants(name string) bool {
	if slices.Contains(floodParts, name) && slices.Contains(c.only, "flood") {
		return true
	}
	if name == "flood" {
		return slices.ContainsFunc(floodParts, c.wants)
	}
	return slices.Contains(c.only, name)
}
