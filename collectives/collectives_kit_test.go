package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/choreotest"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// kitWorld is n in-process ranks on one recorded device: each rank has its
// own GPU stream on a view labelled "rank<r>", and its group's comm stream.
type kitWorld struct {
	rec    *choreotest.Recorder
	groups []*collectives.Group
	ranks  []choreotest.Rank
	tr     *choreotest.Tracer
	staged bool // the CPU cannot see device memory: collectives stage it
	ctx    context.Context
}

func newKitWorld(t *testing.T, backend string, n int) *kitWorld {
	t.Helper()
	rec := testenv.Recorder(t, backend)
	rt := testenv.Runtime(t)
	tr := choreotest.NewTracer()
	gs, err := collectives.Local(rt, n, collectives.WithTimeout(10*time.Second), tr.Option())
	if err != nil {
		t.Fatal(err)
	}
	w := &kitWorld{rec: rec, groups: gs, tr: tr, staged: !rec.Properties().HostVisibleDeviceMem}
	for r, g := range gs {
		s, q := testenv.RecordedStream(t, rec, rt, fmt.Sprintf("rank%d", r))
		w.ranks = append(w.ranks, choreotest.Rank{Number: r, Stream: s, Queue: q, Comm: g.Comm()})
	}
	w.ctx = testenv.Ctx(t, 20*time.Second)
	return w
}

func (w *kitWorld) stream(r int) *streams.GPU { return w.ranks[r].Stream }

// watch starts a Watch on every rank.
func (w *kitWorld) watch(t *testing.T) *choreotest.Watch {
	t.Helper()
	wt, err := choreotest.NewWatch(w.ctx, w.tr, w.ranks...)
	if err != nil {
		t.Fatal(err)
	}
	return wt
}

// expectSame fails the test unless wt shows plan p on every rank.
func (w *kitWorld) expectSame(t *testing.T, wt *choreotest.Watch, p choreotest.Plan) {
	t.Helper()
	if err := wt.Expect(w.ctx, choreotest.Same(len(w.ranks), p)...); err != nil {
		t.Fatal(err)
	}
}

// allReduceAll runs a sum all-reduce of xs[r] on every rank and checks the
// result.
func (w *kitWorld) allReduceAll(t *testing.T, xs []*array.Array) {
	t.Helper()
	outs := make([]*array.Array, len(xs))
	for r, g := range w.groups {
		var err error
		if outs[r], err = g.AllReduce(w.stream(r), xs[r], collectives.Sum); err != nil {
			t.Fatal(err)
		}
	}
	for r, out := range outs {
		if err := out.Wait(w.ctx); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	w.checkSum(t, outs)
}

// checkSum reads the outputs (after the plans were taken: a staged read
// is a copy on the stream) and checks sum_r (r+1) everywhere.
func (w *kitWorld) checkSum(t *testing.T, outs []*array.Array) {
	t.Helper()
	t.Cleanup(func() {
		want := float32(len(outs) * (len(outs) + 1) / 2)
		for r, out := range outs {
			got, err := array.ToSlice[float32](w.ctx, out)
			if err != nil || got[0] != want || got[len(got)-1] != want {
				t.Errorf("rank %d result %v %v, want %v everywhere", r, got, err, want)
			}
		}
	})
}

// TestKitAllReduceStagedPendingInput: where the CPU cannot see device
// memory, each rank's GPU stream runs [fill] (the input, pending), then the
// staging copy with the input fence's update in one unit, the wait for the
// comm task's update and the copy back; the comm stream runs one task.
func TestKitAllReduceStagedPendingInput(t *testing.T) {
	w := newKitWorld(t, "sim-staged", 2)
	wt := w.watch(t)
	xs := make([]*array.Array, 2)
	for r := range xs {
		var err error
		if xs[r], err = array.Full(w.stream(r), []int{8}, array.Float32, float64(r+1)); err != nil {
			t.Fatal(err)
		}
	}
	w.allReduceAll(t, xs)
	w.expectSame(t, wt, choreotest.Plan{
		GPU:   []string{"fill", "copy-d2h+update", "wait+copy-h2d"},
		Tasks: 1,
		Fence: []string{"allreduce: gpu.update(1) gpu.wait(2) cpu.wait(1) cpu.update(2)"},
	})
}

// TestKitAllReduceHostVisibleReadyInput: where the CPU sees device memory
// and the input is ready, nothing is staged and the input needs no update:
// the GPU stream gets one wait, the fence's timeline is 1 = output written.
func TestKitAllReduceHostVisibleReadyInput(t *testing.T) {
	w := newKitWorld(t, "sim", 2)
	xs := make([]*array.Array, 2)
	for r := range xs {
		var err error
		if xs[r], err = array.Full(w.stream(r), []int{8}, array.Float32, float64(r+1)); err != nil {
			t.Fatal(err)
		}
		if err := xs[r].Wait(w.ctx); err != nil {
			t.Fatal(err)
		}
	}
	wt := w.watch(t)
	w.allReduceAll(t, xs)
	w.expectSame(t, wt, choreotest.Plan{
		GPU:   []string{"wait"},
		Tasks: 1,
		Fence: []string{"allreduce: gpu.wait(1) cpu.update(1)"},
	})
}

// TestKitAllReduceHostVisiblePendingInput: where the CPU sees device memory
// but the input's producer has not run (the stream is held), the GPU side
// updates the fence after it and the task waits for that update (the
// input-event flag, decided once, drives both sides).
func TestKitAllReduceHostVisiblePendingInput(t *testing.T) {
	w := newKitWorld(t, "sim", 2)
	wt := w.watch(t)
	xs := make([]*array.Array, 2)
	opens := make([]func(), 2)
	for r := range xs {
		var err error
		if opens[r], err = choreotest.Hold(w.stream(r)); err != nil {
			t.Fatal(err)
		}
		defer opens[r]()
		if xs[r], err = array.Full(w.stream(r), []int{8}, array.Float32, float64(r+1)); err != nil {
			t.Fatal(err)
		}
	}
	outs := make([]*array.Array, 2)
	for r, g := range w.groups {
		var err error
		if outs[r], err = g.AllReduce(w.stream(r), xs[r], collectives.Sum); err != nil {
			t.Fatal(err)
		}
	}
	for _, open := range opens {
		open()
	}
	w.checkSum(t, outs)
	w.expectSame(t, wt, choreotest.Plan{
		GPU:   []string{"wait", "fill", "update", "wait"},
		Tasks: 1,
		Fence: []string{"allreduce: gpu.update(1) gpu.wait(2) cpu.wait(1) cpu.update(2)"},
	})
}

// TestKitSendRecv: Send has no GPU-side wait, Recv no GPU-side update.
// With a ready input on host-visible memory the sender's stream gets
// nothing at all; staged, it gets the copy out with the update. The
// receiver's stream waits for the task's update, then (staged) copies in.
func TestKitSendRecv(t *testing.T) {
	w := newKitWorld(t, testenv.Backend(), 2)
	x, err := array.Full(w.stream(0), []int{8}, array.Float32, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Wait(w.ctx); err != nil {
		t.Fatal(err)
	}
	wt := w.watch(t)
	if err := w.groups[0].Send(w.stream(0), x, 1); err != nil {
		t.Fatal(err)
	}
	y, err := w.groups[1].Recv(w.stream(1), []int{8}, array.Float32, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := y.Wait(w.ctx); err != nil {
		t.Fatal(err)
	}
	send := choreotest.Plan{Tasks: 1, Fence: []string{"send"}}
	recv := choreotest.Plan{GPU: []string{"wait"}, Tasks: 1, Fence: []string{"recv: gpu.wait(1) cpu.update(1)"}}
	if w.staged {
		send.GPU, send.Fence = []string{"copy-d2h+update"}, []string{"send: gpu.update(1) cpu.wait(1)"}
		recv.GPU = []string{"wait+copy-h2d"}
	}
	if err := wt.Expect(w.ctx, send, recv); err != nil {
		t.Fatal(err)
	}
	got, err := array.ToSlice[float32](w.ctx, y)
	if err != nil || !slices.Equal(got, slices.Repeat([]float32{3}, 8)) {
		t.Fatalf("received %v %v", got, err)
	}
}

// TestKitAllGatherPendingInput: an all-gather's plan is an all-reduce's:
// a pending input is updated after, the output waited for.
func TestKitAllGatherPendingInput(t *testing.T) {
	w := newKitWorld(t, testenv.Backend(), 2)
	wt := w.watch(t)
	outs := make([]*array.Array, 2)
	opens := make([]func(), 2)
	for r, g := range w.groups {
		var err error
		if opens[r], err = choreotest.Hold(w.stream(r)); err != nil {
			t.Fatal(err)
		}
		defer opens[r]()
		x, err := array.Full(w.stream(r), []int{4}, array.Float32, float64(r))
		if err != nil {
			t.Fatal(err)
		}
		if outs[r], err = g.AllGather(w.stream(r), x); err != nil {
			t.Fatal(err)
		}
	}
	for _, open := range opens {
		open()
	}
	p := choreotest.Plan{GPU: []string{"wait", "fill", "update", "wait"}, Tasks: 1,
		Fence: []string{"allgather: gpu.update(1) gpu.wait(2) cpu.wait(1) cpu.update(2)"}}
	if w.staged {
		p.GPU = []string{"wait", "fill", "copy-d2h+update", "wait+copy-h2d"}
	}
	w.expectSame(t, wt, p)
	got, err := array.ToSlice[float32](w.ctx, outs[1])
	if err != nil || !slices.Equal(got, []float32{0, 0, 0, 0, 1, 1, 1, 1}) {
		t.Fatalf("gathered %v %v", got, err)
	}
}

// TestKitAllReduceShapeMismatch: ranks whose shapes differ fail on every
// rank. The GPU side was put on the streams before the task found
// out, and still runs through (the failed fence lets the wait pass); the
// CPU side stops after the input wait, with no update; the outputs fail.
func TestKitAllReduceShapeMismatch(t *testing.T) {
	w := newKitWorld(t, testenv.Backend(), 2)
	xs := make([]*array.Array, 2)
	for r := range xs {
		var err error
		if xs[r], err = array.Full(w.stream(r), []int{4 * (r + 1)}, array.Float32, 1); err != nil {
			t.Fatal(err)
		}
		if err := xs[r].Wait(w.ctx); err != nil {
			t.Fatal(err)
		}
	}
	wt := w.watch(t)
	outs := make([]*array.Array, 2)
	for r, g := range w.groups {
		var err error
		if outs[r], err = g.AllReduce(w.stream(r), xs[r], collectives.Sum); err != nil {
			t.Fatal(err)
		}
	}
	for r, out := range outs {
		if err := out.Wait(w.ctx); !errors.Is(err, collectives.ErrShapeMismatch) {
			t.Fatalf("rank %d: %v, want ErrShapeMismatch", r, err)
		}
	}
	p := choreotest.Plan{GPU: []string{"wait"}, Tasks: 1, Fence: []string{"allreduce: gpu.wait(1) failed"}}
	if w.staged {
		p.GPU = []string{"copy-d2h+update", "wait+copy-h2d"}
		p.Fence = []string{"allreduce: gpu.update(1) gpu.wait(2) cpu.wait(1) failed"}
	}
	w.expectSame(t, wt, p)
}
