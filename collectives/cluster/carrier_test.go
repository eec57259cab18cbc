package cluster_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/cluster"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// TestJoinOverARegisteredCarrier: a carrier that only registers itself
// (transporttest's in-memory pipes, which collectives knows nothing of)
// links a group that Join forms, here three ranks of this process, each
// with its own runtime and control plane: asked for by name, it carries
// an all-reduce. (.ci/run runs it without the race detector: each
// runtime's control plane sets grpc's process-wide logger as it starts,
// which the detector reports against another runtime's server reading it.)
func TestJoinOverARegisteredCarrier(t *testing.T) {
	if raceOn {
		t.Skip("several control planes in one process race on grpc's process-wide logger (set by protoactor's Start)")
	}
	transporttest.RegisterPipeCarrier()
	const n = 3
	hosts := make([]string, n)
	for i := range hosts {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hosts[i] = l.Addr().String()
		_ = l.Close()
	}
	dev := testenv.Device(t)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		rt := testenv.Runtime(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = pipeRank(rt, dev, cluster.JoinConfig{Rank: r, Size: n, Hosts: hosts,
				Secret: []byte("0123456789abcdef"), Run: "pipes", Transport: transporttest.PipeCarrier})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// pipeRank joins, checks the links are pipes, and all-reduces.
func pipeRank(rt *actors.Runtime, dev gpu.Device, cfg cluster.JoinConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := cluster.Join(ctx, rt, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = g.Close() }()
	s, err := streams.NewGPU(rt, dev)
	if err != nil {
		return err
	}
	x, err := array.Full(s, []int{1 << 16}, gpu.Float32, float64(cfg.Rank+1))
	if err != nil {
		return err
	}
	y, err := g.AllReduce(s, x, collectives.Sum)
	if err != nil {
		return err
	}
	got, err := array.ToSlice[float32](ctx, y)
	if err != nil {
		return err
	}
	for i, v := range got {
		if v != 6 {
			return fmt.Errorf("element %d: %v, want 6", i, v)
		}
	}
	return nil
}
