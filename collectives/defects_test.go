package collectives_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// Regression tests for the defects found by using the API as a user would
// (D1-D11 and the minor points); each failed before its fix.

// D1: freeing an array while a collective still reads it must not let the
// next allocation reuse its memory under the collective.
func TestFreeWhileCollectiveReads(t *testing.T) {
	w := newWorld(t, 2)
	s2 := testenv.Stream(t, w.rt, w.dev)
	shape := []int{1 << 16}
	x, _ := array.Full(s2, shape, array.Float32, 1)
	if err := x.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	y0, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Free(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	z, _ := array.Full(s2, shape, array.Float32, 9) // the freed block, if it were free
	if err := z.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	x1, _ := array.Full(w.s[1], shape, array.Float32, 1)
	y1, err := w.groups[1].AllReduce(w.s[1], x1, collectives.Sum)
	if err != nil {
		t.Fatal(err)
	}
	for r, y := range []*array.Array{y0, y1} {
		v, err := array.ToSlice[float32](testenv.Ctx(t, 10*time.Second), y)
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		for i, e := range v {
			if e != 2 {
				t.Fatalf("rank %d element %d = %v, want 2 (the input was reused while read)", r, i, e)
			}
		}
	}
	runtime.KeepAlive(z)
	// A freed array is refused with ErrFreed from then on.
	if _, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum); !errors.Is(err, collectives.ErrFreed) {
		t.Fatalf("all-reduce of a freed array: %v, want ErrFreed", err)
	}
	if _, err := array.Scale(s2, x, 2); !errors.Is(err, array.ErrFreed) {
		t.Fatalf("scale of a freed array: %v, want ErrFreed", err)
	}
}

// D2: a Split never matches another collective of the same shape.
func TestSplitDoesNotMatchAllGather(t *testing.T) {
	w := newWorld(t, 2, collectives.WithTimeout(5*time.Second))
	errs := make(chan error, 1)
	go func() {
		_, err := w.groups[0].Split(5, 7)
		errs <- err
	}()
	x, _ := array.FromSlice(w.s[1], []int64{100, 200})
	y, err := w.groups[1].AllGather(w.s[1], x)
	if err == nil {
		_, err = array.ToSlice[int64](testenv.Ctx(t, 10*time.Second), y)
	}
	if !errors.Is(err, collectives.ErrMismatch) {
		t.Fatalf("all-gather against a split: %v, want ErrMismatch", err)
	}
	if err := <-errs; !errors.Is(err, collectives.ErrMismatch) {
		t.Fatalf("split against an all-gather: %v, want ErrMismatch", err)
	}
}

// D4: an input produced on another stream and not complete is refused
// before anything is enqueued (no staging copy reads it while it is written).
func TestCrossStreamRefusedBeforeEnqueue(t *testing.T) {
	w := newWorld(t, 2)
	s2 := testenv.Stream(t, w.rt, w.dev)
	release := testenv.Hold(t, s2)
	x, _ := array.Full(s2, []int{1 << 12}, array.Float32, 1) // pending behind the hold
	last := w.s[0].Last()
	_, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum)
	if !errors.Is(err, collectives.ErrCrossStream) {
		t.Fatalf("got %v, want ErrCrossStream", err)
	}
	if now := w.s[0].Last(); now != last {
		t.Fatalf("the refused call enqueued work on the rank's stream (%v -> %v)", last, now)
	}
	release()
	if err := x.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// D9: an output that fails at once is reported at once, even while its
// stream is still busy with an earlier collective: the failure reaches its
// waiter while that collective still waits for a rank that joins only
// afterwards, so that one must then succeed (a failure reported only once
// the stream is free would come after it failed at its deadline).
// Where device memory is staged, and on the device path, the task first
// waits for its input, which is queued behind the earlier collective: the
// mismatch is found while it waits, from the signatures the ranks posted
// when they called.
func TestFailedOutputWakesWaiters(t *testing.T) {
	w := newWorld(t, 2, collectives.WithTimeout(30*time.Second))
	other, err := collectives.Local(w.rt, 2, collectives.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := array.Full(w.s[0], []int{8}, array.Float32, 1)
	b, _ := array.Full(w.s[1], []int{8}, array.Int32, 1)
	for _, in := range []*array.Array{a, b} {
		if err := in.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	x, _ := array.Full(w.s[0], []int{8}, array.Float32, 1)
	pending, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum) // rank 1 joins late
	if err != nil {
		t.Fatal(err)
	}
	ya, errA := other[0].AllReduce(w.s[0], a, collectives.Sum)
	_, errB := other[1].AllReduce(w.s[1], b, collectives.Sum)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	err = ya.Wait(testenv.Ctx(t, 60*time.Second))
	if !errors.Is(err, collectives.ErrShapeMismatch) || errors.Is(err, collectives.ErrTimeout) {
		t.Fatalf("got %v, want ErrShapeMismatch (not the deadline)", err)
	}
	// Both ranks' tasks have ended (failed), so their GPU-side waits no
	// longer hold anything back: rank 1's next call on its stream is not a
	// deadlock.
	for r, g := range other {
		if err := g.Wait(testenv.Ctx(t, 60*time.Second)); !errors.Is(err, collectives.ErrMismatch) {
			t.Fatalf("the mismatched collective on rank %d: %v, want ErrMismatch", r, err)
		}
	}
	x1, _ := array.Full(w.s[1], []int{8}, array.Float32, 1)
	y1, err := w.groups[1].AllReduce(w.s[1], x1, collectives.Sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := pending.Wait(testenv.Ctx(t, 60*time.Second)); err != nil {
		t.Fatalf("the earlier collective: %v, want success (the failure must reach its waiter while this one still waits for rank 1)", err)
	}
	// Rank 1's side too, before the world is closed under it.
	if err := y1.Wait(testenv.Ctx(t, 60*time.Second)); err != nil {
		t.Fatalf("the earlier collective on rank 1: %v", err)
	}
}

// D10: broadcast roots are matched at full width: 0 and 1<<32 differ, and
// the ranks find it at the match, not at their deadline.
func TestBroadcastRootFullWidth(t *testing.T) {
	w := newWorld(t, 2, collectives.WithTimeout(30*time.Second))
	var outs [2]*array.Array
	for r, root := range []int{0, 1 << 32} {
		x, _ := array.Full(w.s[r], []int{4}, array.Float32, float64(r))
		y, err := w.groups[r].Broadcast(w.s[r], x, root)
		if err != nil {
			if !errors.Is(err, collectives.ErrMismatch) && !errors.Is(err, collectives.ErrBadArgument) {
				t.Fatalf("rank %d: %v", r, err)
			}
			continue
		}
		outs[r] = y
	}
	for r, y := range outs {
		if y == nil {
			continue
		}
		err := y.Wait(testenv.Ctx(t, 60*time.Second))
		if !errors.Is(err, collectives.ErrMismatch) || errors.Is(err, collectives.ErrTimeout) {
			t.Fatalf("rank %d: %v, want ErrMismatch (not the deadline)", r, err)
		}
	}
}

// D11: ranks of one collective sharing a GPU stream are refused at once
// with ErrWouldDeadlock; the other rank fails by the refused rank's abort,
// not at its deadline.
func TestSharedStreamRefused(t *testing.T) {
	w := newWorld(t, 2, collectives.WithTimeout(30*time.Second))
	s := w.s[0]
	x0, _ := array.Full(s, []int{16}, array.Float32, 1)
	y0, err := w.groups[0].AllReduce(s, x0, collectives.Sum, collectives.Donate())
	if err != nil {
		t.Fatal(err)
	}
	x1, _ := array.Full(s, []int{16}, array.Float32, 1)
	_, err = w.groups[1].AllReduce(s, x1, collectives.Sum, collectives.Donate())
	if !errors.Is(err, collectives.ErrWouldDeadlock) {
		t.Fatalf("rank 1 on rank 0's stream: %v, want ErrWouldDeadlock", err)
	}
	err = y0.Wait(testenv.Ctx(t, 60*time.Second))
	if err == nil {
		t.Fatal("rank 0's output succeeded without rank 1")
	}
	var ae *transport.AbortError
	if !errors.As(err, &ae) || ae.Origin != 1 || !errors.Is(ae.Cause, collectives.ErrWouldDeadlock) || errors.Is(err, collectives.ErrTimeout) {
		t.Fatalf("rank 0: %v, want rank 1's abort for the refusal (not its own deadline)", err)
	}
	// The streams go on: the same ranks on their own streams work.
	checkAllReduceWorks(t, w)
}

// D11: groups sharing streams issued in different orders are refused at
// once; in the same order they work.
func TestCrossedGroupOrderRefused(t *testing.T) {
	w := newWorld(t, 2, collectives.WithTimeout(20*time.Second))
	a, b := w.groups, mustLocal(t, w, 2)
	call := func(g *collectives.Group, r int) (*array.Array, error) {
		x, _ := array.Full(w.s[r], []int{16}, array.Float32, 1)
		return g.AllReduce(w.s[r], x, collectives.Sum, collectives.Donate())
	}
	// Same order on both ranks: fine.
	var outs []*array.Array
	for _, g := range [][]*collectives.Group{a, b} {
		for r := range 2 {
			y, err := call(g[r], r)
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, y)
		}
	}
	for _, y := range outs {
		if err := y.Wait(testenv.Ctx(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	// Crossed: rank 0 issues a then b, rank 1 b then a.
	ya0, err := call(a[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	yb0, err := call(b[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	yb1, err := call(b[1], 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(a[1], 1); !errors.Is(err, collectives.ErrWouldDeadlock) {
		t.Fatalf("crossed order: %v, want ErrWouldDeadlock", err)
	}
	if err := ya0.Wait(testenv.Ctx(t, 5*time.Second)); err == nil {
		t.Fatal("rank 0's a succeeded without rank 1")
	}
	for r, y := range []*array.Array{yb0, yb1} {
		if err := y.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
			t.Fatalf("b rank %d: %v", r, err)
		}
	}
}

func mustLocal(t *testing.T, w *world, n int) []*collectives.Group {
	t.Helper()
	g, err := collectives.Local(w.rt, n, collectives.WithTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func checkAllReduceWorks(t *testing.T, w *world) {
	t.Helper()
	var ys []*array.Array
	for r, g := range w.groups {
		x, _ := array.Full(w.s[r], []int{16}, array.Float32, 1)
		y, err := g.AllReduce(w.s[r], x, collectives.Sum)
		if err != nil {
			t.Fatal(err)
		}
		ys = append(ys, y)
	}
	for _, y := range ys {
		v, err := array.ToSlice[float32](testenv.Ctx(t, 10*time.Second), y)
		if err != nil || v[0] != float32(len(w.groups)) {
			t.Fatalf("%v %v", v, err)
		}
	}
}

// A collective pending when its own group closes fails with ErrClosed.
func TestCloseFailsPendingWithErrClosed(t *testing.T) {
	w := newWorld(t, 2)
	x, _ := array.Full(w.s[0], []int{8}, array.Float32, 1)
	y, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := w.groups[0].Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if err := y.Wait(testenv.Ctx(t, 10*time.Second)); !errors.Is(err, collectives.ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
	if err := w.groups[0].Wait(context.Background()); err == nil || !errors.Is(err, collectives.ErrClosed) {
		t.Logf("wait after close: %v", err)
	}
}

// Split orders by key without overflow: the extreme keys sort right.
func TestSplitExtremeKeys(t *testing.T) {
	w := newWorld(t, 3)
	keys := []int{math.MaxInt64, math.MinInt64, 0}
	subs := make([]*collectives.Group, 3)
	errs := make(chan error, 3)
	for r := range 3 {
		go func() {
			g, err := w.groups[r].Split(1, keys[r])
			subs[r] = g
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for r, want := range []int{2, 0, 1} { // MinInt64 first, then 0, then MaxInt64
		if got := subs[r].Rank(); got != want {
			t.Fatalf("rank %d (key %d) got subgroup rank %d, want %d", r, keys[r], got, want)
		}
	}
}

// A scalar (a shape of no dimensions: one element) is an output like any
// other: all-reduce and recv return an array, not nothing.
func TestScalarOutputs(t *testing.T) {
	w := newWorld(t, 2)
	var ys []*array.Array
	for r, g := range w.groups {
		x, _ := array.Full(w.s[r], nil, array.Float32, 1)
		y, err := g.AllReduce(w.s[r], x, collectives.Sum)
		if err != nil || y == nil {
			t.Fatalf("rank %d: %v %v", r, y, err)
		}
		ys = append(ys, y)
	}
	x, _ := array.Full(w.s[0], nil, array.Float32, 5)
	if err := w.groups[0].Send(w.s[0], x, 1); err != nil {
		t.Fatal(err)
	}
	z, err := w.groups[1].Recv(w.s[1], nil, array.Float32, 0)
	if err != nil || z == nil {
		t.Fatalf("recv of a scalar: %v %v", z, err)
	}
	for i, want := range []float32{2, 2, 5} {
		v, err := array.ToSlice[float32](testenv.Ctx(t, 10*time.Second), append(ys, z)[i])
		if err != nil || len(v) != 1 || v[0] != want {
			t.Fatalf("output %d: %v %v, want [%v]", i, v, err, want)
		}
	}
}

// A refused send or recv keeps its place in the pair's order, like every
// other refused call: the peer's matching call fails by the refusing
// rank's abort (not at its deadline), and the next pair meets.
func TestRefusedPointToPointKeepsItsPlace(t *testing.T) {
	for _, refuse := range []string{"recv dtype", "recv shape", "send nil"} {
		t.Run(refuse, func(t *testing.T) {
			w := newWorld(t, 2, collectives.WithTimeout(30*time.Second))
			x, _ := array.Full(w.s[0], []int{4}, array.Float32, 1)
			y, _ := array.Full(w.s[0], []int{4}, array.Float32, 2)
			var first error
			switch refuse {
			case "send nil":
				if err := w.groups[0].Send(w.s[0], nil, 1); err == nil {
					t.Fatal("send of nil accepted")
				}
				r, err := w.groups[1].Recv(w.s[1], []int{4}, array.Float32, 0)
				if err == nil {
					first = r.Wait(testenv.Ctx(t, 60*time.Second))
				} else {
					first = err
				}
			default:
				if err := w.groups[0].Send(w.s[0], x, 1); err != nil {
					t.Fatal(err)
				}
				shape, dt := []int{4}, array.Float32
				if refuse == "recv dtype" {
					dt = array.DType(0)
				} else {
					shape = []int{-4}
				}
				if _, err := w.groups[1].Recv(w.s[1], shape, dt, 0); err == nil {
					t.Fatal("bad recv accepted")
				}
				first = w.groups[0].Wait(testenv.Ctx(t, 60*time.Second))
			}
			if first == nil {
				t.Fatal("the call matched against the refused one succeeded")
			}
			refuser := 1
			if refuse == "send nil" {
				refuser = 0
			}
			var ae *transport.AbortError
			if !errors.As(first, &ae) || ae.Origin != refuser || !errors.Is(ae.Cause, collectives.ErrBadArgument) ||
				errors.Is(first, collectives.ErrTimeout) {
				t.Fatalf("the call matched against the refused one: %v, want rank %d's abort for the refusal (not its own deadline)", first, refuser)
			}
			// The next pair meets: rank 1 gets y, not x.
			if err := w.groups[0].Send(w.s[0], y, 1); err != nil {
				t.Fatal(err)
			}
			r, err := w.groups[1].Recv(w.s[1], []int{4}, array.Float32, 0)
			if err != nil {
				t.Fatal(err)
			}
			v, err := array.ToSlice[float32](testenv.Ctx(t, 10*time.Second), r)
			if err != nil || v[0] != 2 {
				t.Fatalf("the next recv got %v %v, want the next send's 2s", v, err)
			}
		})
	}
}
