package collectives_test

import (
	"context"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
)

// TestDevicePathAllocatesNothingAfterWarmUp: on a device that counts the
// allocations it asks of its driver, the device path's all-reduce (out of
// place and in place), all-gather, reduce-scatter and broadcast of 1 MiB
// per rank, repeated after a warm-up, allocate nothing more: outputs,
// inputs and peer tables come from the device's caches. Skips on devices
// that keep no count (the sim).
func TestDevicePathAllocatesNothingAfterWarmUp(t *testing.T) {
	const n, count = 2, 256 << 10
	w := newWorld(t, n, collectives.WithDataPath(collectives.DataPathDevice), collectives.WithTimeout(60*time.Second))
	c, ok := w.dev.(gpu.AllocCounter)
	if !ok {
		t.Skipf("%s does not count its driver allocations", w.dev.Properties().Backend)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	round := func() {
		t.Helper()
		var all []*array.Array
		for r := range n {
			g, s := w.groups[r], w.s[r]
			x, err := array.Full(s, []int{count}, gpu.Float32, float64(r+1))
			if err != nil {
				t.Fatal(err)
			}
			y, err := array.Full(s, []int{count}, gpu.Float32, float64(r+1))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, x)
			for _, call := range []func() (*array.Array, error){
				func() (*array.Array, error) { return g.AllReduce(s, x, collectives.Sum) },
				func() (*array.Array, error) { return g.AllReduce(s, y, collectives.Sum, collectives.Donate()) },
				func() (*array.Array, error) { return g.AllGather(s, x) },
				func() (*array.Array, error) { return g.ReduceScatter(s, x, collectives.Sum) },
				func() (*array.Array, error) { return g.Broadcast(s, x, 0) },
			} {
				out, err := call()
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, out)
			}
		}
		for _, a := range all {
			if err := a.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, a := range all {
			_ = a.Free()
		}
	}
	for range 3 {
		round()
	}
	before := c.DriverAllocs()
	const rounds = 10
	for range rounds {
		round()
	}
	if d := c.DriverAllocs() - before; d != 0 {
		t.Fatalf("%d driver allocations in %d rounds of five collectives after the warm-up, want 0", d, rounds)
	}
}
