package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/sim"
	"github.com/choreo-gpu/choreo/streams"
)

// world is the ranks of one group that this process holds: every rank of
// an in-process group (newLocalWorld), or the one rank this process joined
// (joinWorld). Held rank i has its group handle groups[i] (its rank in the
// group is groups[i].Rank()) and a GPU stream of its own, s[i]; all share
// one runtime and device. The run loop and the bench sweep work on the
// held ranks only: each held rank checks its own outputs, and the process
// that holds rank 0 prints (lead).
type world struct {
	rt     *actors.Runtime
	dev    gpu.Device
	size   int // ranks in the whole group
	groups []*collectives.Group
	s      []*streams.GPU
	joined bool // the other ranks are other processes
	obs    *observed
	path   collectives.DataPath // the data path asked for
}

// pathLine says which data path the world's collectives take.
func (w *world) pathLine() string {
	switch {
	case w.path == collectives.DataPathAuto && len(w.groups) > 0 && w.groups[0].OneDevice():
		return fmt.Sprintf("auto: device-resident for payloads of %d bytes or more per rank (the ranks share one GPU), host-staged below", collectives.AutoDeviceMinBytes)
	case w.path == collectives.DataPathNCCL && w.joined:
		if _, ok := w.dev.(gpu.EngineDevice); ok {
			return "engine (NCCL moves all-reduce, all-gather, reduce-scatter of equal blocks and broadcast on the device; the other ops host-staged)"
		}
		return "host (asked for nccl, but this device has no collective engine)"
	case w.path == collectives.DataPathDevice && w.joined:
		if _, ok := w.dev.(gpu.IPCDevice); ok {
			return "device-resident across processes (CUDA IPC: all-reduce, all-gather, reduce-scatter, broadcast, even all-to-all read the peers' device buffers; the other ops host-staged)"
		}
		return "host (asked for device, but this device cannot share its memory with other processes)"
	case w.path == collectives.DataPathDevice && !w.joined:
		if _, ok := w.dev.(gpu.PeerDevice); ok {
			return "device-resident (all-reduce, all-gather, reduce-scatter, broadcast: kernels read the peers' device buffers; the other ops host-staged)"
		}
		return "host (asked for device, but this device has no peer tables)"
	case w.dev.Properties().HostVisibleDeviceMem:
		return "host (the CPU sees device memory: no staging)"
	}
	return "host-staged (device memory copied through pinned host memory)"
}

func newLocalWorld(log *zap.Logger, backend string, n int, timeout time.Duration, opts ...collectives.Option) (*world, error) {
	return newObservedWorld(log, backend, n, timeout, obsFlags{}, opts...)
}

// newObservedWorld is newLocalWorld whose ranks are traced and counted as
// f asks.
func newObservedWorld(log *zap.Logger, backend string, n int, timeout time.Duration, f obsFlags, opts ...collectives.Option) (*world, error) {
	if n < 1 {
		return nil, fmt.Errorf("ranks must be >= 1, got %d", n)
	}
	obs, err := observeLocal(log, f)
	if err != nil {
		return nil, err
	}
	w, err := openWorld(log, backend, obs)
	if err != nil {
		obs.close()
		return nil, err
	}
	groups, err := collectives.Local(w.rt, n, slices.Concat([]collectives.Option{collectives.WithTimeout(timeout), collectives.WithDevice(w.dev)}, obs.options(), opts)...)
	if err == nil {
		err = w.hold(groups)
	}
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// openWorld opens the device and a runtime whose signal handler releases
// every fence on SIGINT or SIGTERM and saves obs's trace before the
// process ends.
func openWorld(log *zap.Logger, backend string, obs *observed) (*world, error) {
	dev, err := gpu.Open(backend)
	if err != nil {
		return nil, err
	}
	rt, err := actors.NewRuntime(actors.WithLogger(log), actors.WithSignalHandler(func(os.Signal) { obs.save() }))
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	return &world{rt: rt, dev: dev, obs: obs}, nil
}

// hold makes groups the held ranks, each with a new GPU stream.
func (w *world) hold(groups []*collectives.Group) error {
	w.groups, w.size = groups, groups[0].Size()
	for range groups {
		s, err := streams.NewGPU(w.rt, w.dev)
		if err != nil {
			return err
		}
		w.s = append(w.s, s)
	}
	return nil
}

// close leaves the group (a joined rank's peers learn at once) and closes
// the runtime and the device.
func (w *world) close() {
	for _, g := range w.groups {
		_ = g.Close()
	}
	_ = w.rt.Close()
	_ = w.dev.Close()
	w.obs.close()
}

// lead reports whether this process holds rank 0, which prints.
func (w *world) lead() bool { return w.groups[0].Rank() == 0 }

// each runs fn for every held rank i, concurrently when there are several
// (a call that blocks until every rank makes it, such as Barrier, needs
// them all at once), and joins their errors.
func (w *world) each(fn func(i int) error) error {
	if len(w.groups) == 1 {
		return fn(0)
	}
	errs := make([]error, len(w.groups))
	var wg sync.WaitGroup
	for i := range w.groups {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// barrier returns once every rank of the group has reached it.
func (w *world) barrier(ctx context.Context) error {
	return w.each(func(i int) error { return w.groups[i].Barrier(ctx) })
}

// sum adds up each held rank's counts over the whole group (an all-reduce
// of int64s): vals[i] are held rank i's.
func (w *world) sum(ctx context.Context, vals [][]int64) ([]int64, error) {
	outs := make([][]int64, len(w.groups))
	err := w.each(func(i int) error {
		x, err := array.FromSlice(w.s[i], vals[i])
		if err != nil {
			return err
		}
		defer func() { _ = x.Free() }()
		y, err := w.groups[i].AllReduce(w.s[i], x, collectives.Sum)
		if err != nil {
			return err
		}
		defer func() { _ = y.Free() }()
		outs[i], err = array.ToSlice[int64](ctx, y)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("totals: %w", err)
	}
	return outs[0], nil
}

// describe is a one-line account of the ranks and the device.
func (w *world) describe() string {
	p := w.dev.Properties()
	s := fmt.Sprintf("%s (%s)", p.Name, p.Backend)
	if p.ComputeCapability != "" {
		s += ", compute " + p.ComputeCapability
	}
	switch {
	case p.MemoryBytes > 0 && p.Backend == "sim":
		s += fmt.Sprintf(", %s of host RAM as device memory (the most this process may take; %s sets it)",
			humanize.IBytes(p.MemoryBytes), sim.MemoryEnv)
	case p.MemoryBytes > 0:
		s += ", " + humanize.IBytes(p.MemoryBytes)
	}
	if w.joined {
		return fmt.Sprintf("%d ranks, one process each, on %s", w.size, s)
	}
	return fmt.Sprintf("%d in-process ranks on %s", w.size, s)
}

// sizeFlag is a byte size given as "4MiB", "64k", "1048576".
type sizeFlag uint64

// UnmarshalText implements encoding.TextUnmarshaler for kong.
func (s *sizeFlag) UnmarshalText(b []byte) error {
	v, err := humanize.ParseBytes(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("size %q: %w", b, err)
	}
	*s = sizeFlag(v)
	return nil
}
