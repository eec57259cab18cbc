package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// TestTimelinesOnRealCollectives observes each collective's fence calls:
// all-reduce, all-gather, send and recv, with and without an input event,
// each record exactly the expected (side, op, value) sequence.
func TestTimelinesOnRealCollectives(t *testing.T) {
	var mu sync.Mutex
	traces := map[string][]fence.Step{}
	w := newWorld(t, 2, collectives.WithOpHook(func(e collectives.TraceEvent) {
		mu.Lock()
		defer mu.Unlock()
		traces[fmt.Sprintf("%s/%d/%v", e.Op, e.Rank, e.HasEvent)] = e.Steps
	}))
	gu := fence.Step{Side: fence.GPUSide, Op: fence.OpUpdate, Value: 1}
	gw := func(v uint32) fence.Step { return fence.Step{Side: fence.GPUSide, Op: fence.OpWait, Value: v} }
	cw := fence.Step{Side: fence.CPUSide, Op: fence.OpWait, Value: 1}
	cu := func(v uint32) fence.Step { return fence.Step{Side: fence.CPUSide, Op: fence.OpUpdate, Value: v} }
	for _, withEvent := range []bool{false, true} {
		xs := make([]*array.Array, 2)
		var unblock []func()
		for r := range 2 {
			x := fromFloat64(t, w.s[r], gpu.Float32, []float64{1, 2, 3})
			if err := x.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			if withEvent {
				// Hold the stream so the input is still being produced when
				// the collective is put on it.
				word, _ := w.dev.NewFenceWord()
				if _, err := w.s[r].Enqueue([]gpu.Command{gpu.WaitValue{Word: word, Value: 1}}, nil); err != nil {
					t.Fatal(err)
				}
				unblock = append(unblock, func() { word.Store(1) })
				var err error
				if x, err = array.Scale(w.s[r], x, 1); err != nil {
					t.Fatal(err)
				}
			}
			xs[r] = x
		}
		outs := []*array.Array{}
		for r := range 2 {
			g, s, x := w.groups[r], w.s[r], xs[r]
			y, err := g.AllReduce(s, x, collectives.Sum)
			if err != nil {
				t.Fatal(err)
			}
			z, err := g.AllGather(s, x)
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, y, z)
			if r == 0 {
				if err := g.Send(s, x, 1); err != nil {
					t.Fatal(err)
				}
			} else {
				v, err := g.Recv(s, []int{3}, gpu.Float32, 0)
				if err != nil {
					t.Fatal(err)
				}
				outs = append(outs, v)
			}
		}
		for _, u := range unblock {
			u()
		}
		for _, o := range outs {
			if err := o.Wait(testenv.Ctx(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		for r := range 2 {
			if err := w.groups[r].Wait(testenv.Ctx(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		want := map[string][]fence.Step{
			"allreduce/0": {gw(1), cu(1)}, "allgather/0": {gw(1), cu(1)}, "send/0": nil, "recv/1": {gw(1), cu(1)},
		}
		// Where the CPU cannot see device memory, the input is staged by a
		// copy on the GPU stream: there is always an input event.
		staged := !w.dev.Properties().HostVisibleDeviceMem
		if withEvent || staged {
			want = map[string][]fence.Step{
				"allreduce/0": {gu, gw(2), cw, cu(2)}, "allgather/0": {gu, gw(2), cw, cu(2)},
				"send/0": {gu, cw}, "recv/1": {gw(1), cu(1)},
			}
		}
		for k, steps := range want {
			key := fmt.Sprintf("%s/%v", k, withEvent || staged)
			if k == "recv/1" {
				key = "recv/1/false" // a recv has no input, so never an input event
			}
			got, ok := traces[key]
			if !ok {
				t.Fatalf("no trace for %s (have %v)", key, traces)
			}
			if !slices.Equal(got, steps) {
				t.Fatalf("%s: timeline %v, want %v", key, got, steps)
			}
		}
		clear(traces)
		mu.Unlock()
	}
}

// expectFailure waits for y and checks that it failed with target, not
// at its deadline.
func expectFailure(t *testing.T, rank int, y *array.Array, target error) {
	t.Helper()
	_, err := array.ToFloat64(testenv.Ctx(t, 60*time.Second), y)
	if !errors.Is(err, target) || !errors.Is(err, collectives.ErrReleased) || errors.Is(err, collectives.ErrTimeout) {
		t.Fatalf("rank %d: got %v, want an error matching %v and ErrReleased (not the deadline)", rank, err, target)
	}
}

// TestBadInputOnEveryRank: each kind of bad input fails on every rank,
// with a testable error, not at the deadline; then the group still works.
func TestBadInputOnEveryRank(t *testing.T) {
	w := newWorld(t, 3, collectives.WithMaxBytes(1<<20), collectives.WithTimeout(30*time.Second))
	cases := []struct {
		name   string
		target error
		call   func(r int, g *collectives.Group, s *streams.GPU) (*array.Array, error)
	}{
		{"shape", collectives.ErrShapeMismatch, func(r int, g *collectives.Group, s *streams.GPU) (*array.Array, error) {
			return g.AllReduce(s, fromFloat64(t, s, gpu.Float32, make([]float64, 4+r)), collectives.Sum)
		}},
		{"dtype", collectives.ErrShapeMismatch, func(r int, g *collectives.Group, s *streams.GPU) (*array.Array, error) {
			dt := gpu.Float32
			if r == 1 {
				dt = gpu.Int32
			}
			return g.AllReduce(s, fromFloat64(t, s, dt, make([]float64, 4)), collectives.Sum)
		}},
		{"different-ops", collectives.ErrMismatch, func(r int, g *collectives.Group, s *streams.GPU) (*array.Array, error) {
			x := fromFloat64(t, s, gpu.Float32, make([]float64, 4))
			if r == 2 {
				return g.AllGather(s, x)
			}
			return g.AllReduce(s, x, collectives.Sum)
		}},
		{"unknown-op", collectives.ErrBadOp, func(r int, g *collectives.Group, s *streams.GPU) (*array.Array, error) {
			return g.AllReduce(s, fromFloat64(t, s, gpu.Float32, make([]float64, 4)), collectives.Op(42))
		}},
		{"root-out-of-range", collectives.ErrBadArgument, func(r int, g *collectives.Group, s *streams.GPU) (*array.Array, error) {
			return g.Broadcast(s, fromFloat64(t, s, gpu.Float32, make([]float64, 4)), 7)
		}},
		{"one-rank-over-limit", collectives.ErrAborted, func(r int, g *collectives.Group, s *streams.GPU) (*array.Array, error) {
			n := 4
			if r == 0 {
				n = 1 << 19 // 2 MiB of float32: over the 1 MiB limit
			}
			return g.AllReduce(s, fromFloat64(t, s, gpu.Float32, make([]float64, n)), collectives.Sum)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			outs := make([]*array.Array, len(w.groups))
			for r, g := range w.groups {
				y, err := c.call(r, g, w.s[r])
				if err != nil {
					if c.name == "one-rank-over-limit" && r == 0 && errors.Is(err, collectives.ErrTooLarge) {
						continue // this rank is told at once
					}
					t.Fatalf("rank %d: %v", r, err)
				}
				outs[r] = y
			}
			for r, y := range outs {
				if y != nil {
					expectFailure(t, r, y, c.target)
				}
			}
		})
	}
	// The group and the runtime stay usable.
	runAllReduce(t, w, gpu.Float32, collectives.Sum, 16)
	if _, err := w.groups[0].Recv(w.s[0], []int{1}, gpu.Float32, 5); !errors.Is(err, collectives.ErrBadPeer) {
		t.Fatalf("recv from rank 5 of 3: %v", err)
	}
	if err := w.groups[0].Send(w.s[0], nil, 1); !errors.Is(err, collectives.ErrBadArgument) {
		t.Fatalf("send of nil: %v", err)
	}
	if _, err := w.groups[1].AllReduce(nil, nil, collectives.Sum); err == nil {
		t.Fatal("nil stream and input accepted")
	}
	if testenv.Fences(t, w.rt).Live() > 0 {
		time.Sleep(100 * time.Millisecond)
	}
	if n := testenv.Fences(t, w.rt).Live(); n != 0 {
		t.Fatalf("%d fences left live", n)
	}
}

// TestRankFailsMidCollective: one rank leaves while the others are in an
// all-reduce; they fail by its loss, not at their deadline, every fence is
// released, and no goroutine is left behind.
func TestRankFailsMidCollective(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		dev := testenv.Device(t)
		rt, err := actors.NewRuntime()
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		gs, err := collectives.Local(rt, 3, collectives.WithTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var outs []*array.Array
		for r := range 2 { // rank 2 never joins: it closes instead
			s, _ := streams.NewGPU(rt, dev)
			y, err := gs[r].AllReduce(s, fromFloat64(t, s, gpu.Float32, make([]float64, 1000)), collectives.Sum)
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, y)
		}
		time.Sleep(20 * time.Millisecond)
		if err := gs[2].Close(); err != nil {
			t.Fatal(err)
		}
		// The loss of rank 2, directly or as the cause of a survivor's abort.
		for r, y := range outs {
			_, err := array.ToFloat64(testenv.Ctx(t, 60*time.Second), y)
			if !errors.Is(err, collectives.ErrPeerLost) || errors.Is(err, collectives.ErrTimeout) {
				t.Fatalf("rank %d: %v, want ErrPeerLost (not the deadline)", r, err)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for testenv.Fences(t, rt).Live() != 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := testenv.Fences(t, rt).Live(); n != 0 {
			t.Fatalf("%d fences live after the failure", n)
		}
		// The survivors' runtime stays usable for a new group.
		gs2, err := collectives.Local(rt, 2)
		if err != nil {
			t.Fatal(err)
		}
		ys := make([]*array.Array, 2)
		for r := range 2 { // each rank its own stream: ranks sharing one can deadlock
			s, _ := streams.NewGPU(rt, dev)
			x := fromFloat64(t, s, gpu.Int8, []float64{3})
			if ys[r], err = gs2[r].AllReduce(s, x, collectives.Sum); err != nil {
				t.Fatal(err)
			}
		}
		for _, y := range ys {
			v, err := array.ToSlice[int8](testenv.Ctx(t, 5*time.Second), y)
			if err != nil || v[0] != 6 {
				t.Fatalf("new group after failure: %v %v", v, err)
			}
		}
		for _, g := range append(gs, gs2...) {
			_ = g.Close()
		}
	}()
	var after int
	for range 100 {
		runtime.GC()
		if after = runtime.NumGoroutine(); after <= before+2 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Fatalf("goroutines: %d before, %d after\n%s", before, after, buf[:runtime.Stack(buf, true)])
}

// TestManyInFlight: many collectives queued at once on one group and on
// several groups concurrently stay right (order is each rank's call order).
func TestManyInFlight(t *testing.T) {
	dev := testenv.Device(t)
	rt := testenv.Runtime(t)
	const groups, ranks, ops = 3, 3, 40
	var wg sync.WaitGroup
	errs := make(chan error, groups*ranks)
	for gi := range groups {
		gs, err := collectives.Local(rt, ranks, collectives.WithTimeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for r := range ranks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := streams.NewGPU(rt, dev)
				if err != nil {
					errs <- err
					return
				}
				var outs []*array.Array
				for k := range ops {
					x, _ := array.Full(s, []int{64}, gpu.Int64, float64(k*100+gi*10+r))
					y, err := gs[r].AllReduce(s, x, collectives.Sum)
					if err != nil {
						errs <- err
						return
					}
					outs = append(outs, y)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				for k, y := range outs {
					v, err := array.ToSlice[int64](ctx, y)
					want := int64(ranks*(k*100+gi*10) + ranks*(ranks-1)/2)
					if err != nil || v[63] != want {
						errs <- fmt.Errorf("group %d rank %d op %d: %v, want %d: %v", gi, r, k, v[63], want, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
