package collectives_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// TestBatchRing: every rank sends a large array to its right neighbour and
// receives from its left in one batch, sends listed after receives. Issued
// as separate calls in that order the in-process transport's rendezvous
// would hold every rank's receive behind nothing and its send behind its
// receive on the comm stream; as a batch they run together and complete.
// With 2 ranks left and right are the same peer.
func TestBatchRing(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		w := newWorld(t, n, collectives.WithTimeout(30*time.Second))
		const count = 1 << 20
		outs := make([][]*array.Array, n)
		ins := make([][]float64, n)
		for r := range n {
			ins[r] = input(gpu.Float32, r, count)
			x := fromFloat64(t, w.s[r], gpu.Float32, ins[r], count)
			right, left := (r+1)%n, (r+n-1)%n
			var err error
			outs[r], err = w.groups[r].Batch(w.s[r],
				collectives.RecvOp([]int{count}, gpu.Float32, left),
				collectives.SendOp(x, right))
			if err != nil {
				t.Fatal(err)
			}
			if len(outs[r]) != 2 || outs[r][0] == nil || outs[r][1] != nil {
				t.Fatalf("rank %d: outputs %v: want the receive's array, then nil for the send", r, outs[r])
			}
		}
		for r := range n {
			if got := values(t, gpu.Float32, outs[r][0]); !slices.Equal(got, ins[(r+n-1)%n]) {
				t.Fatalf("n=%d rank %d: wrong data from its left", n, r)
			}
			if err := w.groups[r].Wait(testenv.Ctx(t, 30*time.Second)); err != nil {
				t.Fatalf("n=%d rank %d: %v", n, r, err)
			}
		}
	}
}

// TestBatchCompletesIndependently: a receive whose sender has not sent yet
// does not hold back another receive of the same batch; a batch's sends
// meet plain Recv calls and its receives plain Sends, in pair order.
func TestBatchCompletesIndependently(t *testing.T) {
	w := newWorld(t, 3, collectives.WithTimeout(30*time.Second))
	ys, err := w.groups[0].Batch(w.s[0],
		collectives.RecvOp([]int{2}, gpu.Int32, 1),
		collectives.RecvOp([]int{2}, gpu.Int32, 2))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.groups[1].Send(w.s[1], fromFloat64(t, w.s[1], gpu.Int32, []float64{1, 2}, 2), 0); err != nil {
		t.Fatal(err)
	}
	// Wait on the array, not a read: a read is a copy on the same stream,
	// queued behind the other receive's GPU-side wait where memory is
	// staged.
	if err := ys[0].Wait(testenv.Ctx(t, 20*time.Second)); err != nil {
		t.Fatalf("the receive from rank 1, before rank 2 sent: %v", err)
	}
	if ys[1].Ready() {
		t.Fatal("the receive from rank 2 is ready before rank 2 sent")
	}
	if err := w.groups[2].Send(w.s[2], fromFloat64(t, w.s[2], gpu.Int32, []float64{3, 4}, 2), 0); err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]float64{{1, 2}, {3, 4}} {
		if got := values(t, gpu.Int32, ys[i]); !slices.Equal(got, want) {
			t.Fatalf("receive %d: %v, want %v", i, got, want)
		}
	}
	// The other way: a batch's send meets a plain Recv.
	if _, err := w.groups[1].Batch(w.s[1], collectives.SendOp(fromFloat64(t, w.s[1], gpu.Int32, []float64{5}, 1), 2)); err != nil {
		t.Fatal(err)
	}
	y, err := w.groups[2].Recv(w.s[2], []int{1}, gpu.Int32, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, gpu.Int32, y); got[0] != 5 {
		t.Fatalf("plain recv of a batched send: %v", got)
	}
}

// TestBatchFailures: a batch with a bad op is refused whole and its peers'
// matching ops fail at once; a receive whose shape disagrees with its
// send fails with ErrShapeMismatch while the other op of its batch
// completes; a closed group refuses a batch.
func TestBatchFailures(t *testing.T) {
	w := newWorld(t, 2, collectives.WithTimeout(30*time.Second))
	x := fromFloat64(t, w.s[0], gpu.Float32, []float64{1, 2, 3}, 3)
	_, err := w.groups[0].Batch(w.s[0], collectives.SendOp(x, 1), collectives.SendOp(nil, 1))
	if !errors.Is(err, collectives.ErrBadArgument) {
		t.Fatalf("batch with a nil input: %v, want ErrBadArgument", err)
	}
	ys, err := w.groups[1].Batch(w.s[1], collectives.RecvOp([]int{3}, gpu.Float32, 0), collectives.RecvOp([]int{3}, gpu.Float32, 0))
	if err != nil {
		t.Fatal(err)
	}
	for i, y := range ys {
		if err := y.Wait(testenv.Ctx(t, 20*time.Second)); !errors.Is(err, collectives.ErrAborted) || !errors.Is(err, collectives.ErrBadArgument) {
			t.Fatalf("peer's receive %d of a refused batch: %v, want its abort with the cause", i, err)
		}
	}
	w.groups[1].Wait(testenv.Ctx(t, 20*time.Second))
	if _, err := w.groups[0].Batch(w.s[0], collectives.SendOp(x, 5)); !errors.Is(err, collectives.ErrBadPeer) {
		t.Fatalf("peer out of range: %v, want ErrBadPeer", err)
	}
	// Shape mismatch in one op; the other completes.
	ys0, err := w.groups[0].Batch(w.s[0], collectives.SendOp(x, 1), collectives.RecvOp([]int{1}, gpu.Int64, 1))
	if err != nil {
		t.Fatal(err)
	}
	ys1, err := w.groups[1].Batch(w.s[1], collectives.RecvOp([]int{4}, gpu.Float32, 0),
		collectives.SendOp(fromFloat64(t, w.s[1], gpu.Int64, []float64{7}, 1), 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := ys1[0].Wait(testenv.Ctx(t, 20*time.Second)); !errors.Is(err, collectives.ErrShapeMismatch) {
		t.Fatalf("receive of 4 from a send of 3: %v, want ErrShapeMismatch", err)
	}
	if got := values(t, gpu.Int64, ys0[1]); got[0] != 7 {
		t.Fatalf("the batch's other op: %v, want 7", got)
	}
	for r := range 2 {
		w.groups[r].Wait(testenv.Ctx(t, 20*time.Second))
		if err := w.groups[r].Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.groups[0].Batch(w.s[0], collectives.SendOp(x, 1)); !errors.Is(err, collectives.ErrClosed) {
		t.Fatalf("batch on a closed group: %v, want ErrClosed", err)
	}
}
