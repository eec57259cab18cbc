package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/cluster"
	"github.com/choreo-gpu/choreo/gpu"
)

// nodeCmd is one rank of a cluster in this process: it joins the group
// from the environment that demo launch sets (CHOREO_RANK,
// CHOREO_WORLD_SIZE, CHOREO_HOSTFILE, CHOREO_SECRET, CHOREO_RUN), or
// torchrun, Open MPI or Slurm with CHOREO_SECRET (cluster.FromEnv),
// then runs the subcommand with its one rank.
type nodeCmd struct {
	Run   nodeRunCmd   `cmd:"" default:"withargs" help:"The training-like loop, this process's rank."`
	Bench nodeBenchCmd `cmd:"" help:"The sweep, this process's rank."`
	Check nodeCheckCmd `cmd:"" help:"Self-checks across processes (the matrix of ops, dtypes and sizes, soak, mismatch, mismatch-alltoallv), for the integration tests."`
}

// nodeRunCmd is the run loop on the joined rank, with run's flags.
type nodeRunCmd struct {
	runFlags
	obsFlags
}

// Run joins and runs the loop.
func (c *nodeRunCmd) Run(g *globals) error {
	if _, _, err := c.shape(); err != nil {
		return err
	}
	if c.Elastic {
		return c.runElastic(g)
	}
	w, err := joinWorld(g.log, c.Backend, c.Timeout, c.obsFlags)
	if err != nil {
		return err
	}
	defer w.close()
	if err := c.loop(w); err != nil {
		return err
	}
	err = w.finish(c.Timeout)
	lingerRank(c.MetricsLinger)
	return err
}

// nodeBenchCmd is the sweep on the joined rank, with bench's flags.
type nodeBenchCmd struct {
	benchFlags
	pathFlags
	obsFlags
}

// Run joins and runs the sweep; the latency line's pair is ranks 0 and 1,
// split off the group.
func (c *nodeBenchCmd) Run(g *globals) error {
	c.resolveMaxSize(false, 1)
	if _, _, err := c.check(); err != nil {
		return err
	}
	if err := c.pathFlags.setEnv(); err != nil {
		return err
	}
	w, err := joinWorld(g.log, c.Backend, c.Timeout, c.obsFlags)
	if err != nil {
		return err
	}
	defer w.close()
	if err := c.sweep(w, w.pair); err != nil {
		return err
	}
	err = w.finish(c.Timeout)
	lingerRank(c.MetricsLinger)
	return err
}

// joinWorld holds the one rank this process joins (cluster.Join with
// cluster.FromEnv), on its own runtime and device.
// f's --metrics and --trace take effect where the rank's launcher has not
// set them up (observeRank).
func joinWorld(log *zap.Logger, backend string, timeout time.Duration, f obsFlags) (*world, error) {
	cfg := cluster.FromEnv()
	forced, err := algorithmOption()
	if err != nil {
		return nil, err
	}
	obs, err := observeRank(cfg.Rank, cfg.Size, f)
	if err != nil {
		return nil, err
	}
	w, err := openWorld(log.With(zap.Int("rank", cfg.Rank)), backend, obs)
	if err != nil {
		obs.close()
		return nil, err
	}
	if d, ok := w.dev.(interface{ Ordinal() int }); ok { // the GPU this rank's backend chose (CUDA)
		fmt.Printf("rank %d: GPU %d, %s (%s)\n", cfg.Rank, d.Ordinal(), w.dev.Properties().Name, w.dev.Properties().Backend)
	}
	g, err := cluster.Join(context.Background(), w.rt, cfg, append([]collectives.Option{collectives.WithTimeout(timeout),
		collectives.WithDevice(w.dev)}, append(w.obs.options(), forced...)...)...)
	if err == nil {
		w.joined, w.path = true, g.DataPath()
		err = w.hold([]*collectives.Group{g})
	}
	if err == nil && w.obs.tracer != nil { // the parts' time bases, for the launcher's merge
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		var off time.Duration
		off, err = measureClock(ctx, g, w.s[0])
		cancel()
		w.obs.tracer.SetClockOffset(off)
	}
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// pair splits ranks 0 and 1 off w's group (a collective: every rank calls
// it); ranks other than 0 and 1 get a nil world.
func (w *world) pair() (*world, func(), error) {
	g := w.groups[0]
	color := -1
	if g.Rank() < 2 {
		color = 0
	}
	sub, err := g.Split(color, g.Rank())
	if err != nil || sub == nil {
		return nil, nil, err
	}
	pw := &world{rt: w.rt, dev: w.dev, size: sub.Size(), groups: []*collectives.Group{sub}, s: w.s, joined: true, path: sub.DataPath()}
	return pw, func() { _ = sub.Close() }, nil
}

// finish ends a joined rank's part without failing another's. A rank's
// exit fails every operation a peer still has with it whose data has not
// arrived whole (a large message still being read, say), so the ranks
// leave in order: each rank other than 0
// tells rank 0 it is done (every operation of its own has finished) and
// waits for rank 0's answer, which comes once every rank is done; rank 0
// stays until each has gone (its Recv from the rank fails with
// ErrPeerLost) or the timeout passes.
//
// The trace stops first: the leaving is the run's shutdown, not the run.
func (w *world) finish(timeout time.Duration) error {
	w.obs.stopTracing()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	g, s := w.groups[0], w.s[0]
	one := []int{1}
	if g.Rank() != 0 {
		x, err := array.Full(s, one, gpu.Uint8, 1)
		if err == nil {
			defer func() { _ = x.Free() }()
			err = g.Send(s, x, 0)
		}
		var y *array.Array
		if err == nil {
			y, err = g.Recv(s, one, gpu.Uint8, 0)
		}
		if err == nil {
			defer func() { _ = y.Free() }()
			err = y.Wait(ctx)
		}
		if err != nil {
			return fmt.Errorf("leave: %w", err)
		}
		return nil
	}
	return w.dismiss(ctx)
}

// dismiss is rank 0's part of finish.
func (w *world) dismiss(ctx context.Context) error {
	g, s := w.groups[0], w.s[0]
	one := []int{1}
	var arrays []*array.Array
	defer func() { freeAll(arrays) }()
	for r := 1; r < w.size; r++ { // every rank is done
		y, err := g.Recv(s, one, gpu.Uint8, r)
		if err == nil {
			arrays = append(arrays, y)
			err = y.Wait(ctx)
		}
		if err != nil {
			return fmt.Errorf("leave: rank %d: %w", r, err)
		}
	}
	x, err := array.Full(s, one, gpu.Uint8, 1)
	if err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	arrays = append(arrays, x)
	for r := 1; r < w.size; r++ {
		if err := g.Send(s, x, r); err != nil {
			return fmt.Errorf("leave: rank %d: %w", r, err)
		}
	}
	for r := 1; r < w.size; r++ { // until each has gone
		y, err := g.Recv(s, one, gpu.Uint8, r)
		if err == nil {
			arrays = append(arrays, y)
			err = y.Wait(ctx)
		}
		if err != nil && !errors.Is(err, collectives.ErrPeerLost) {
			return fmt.Errorf("leave: rank %d: %w", r, err)
		}
	}
	return nil
}
