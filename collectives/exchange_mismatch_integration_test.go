package collectives_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// paths runs fn on in-process worlds of n ranks, once reading peers'
// buffers in place (Local's default) and once over messages, as ranks in
// separate processes do.
func paths(t *testing.T, n int, fn func(t *testing.T, w *world)) {
	t.Run("direct", func(t *testing.T) { fn(t, newWorld(t, n)) })
	t.Run("messages", func(t *testing.T) {
		fn(t, newWorld(t, n, collectives.WithAlgorithm(algo.WithAlgorithm(algo.Ring))))
	})
}

// failsEverywhere waits for every rank's output (nil: its Wait) and wants
// each to fail with want.
func failsEverywhere(t *testing.T, w *world, outs []*array.Array, want error) {
	t.Helper()
	for r, y := range outs {
		var err error
		if y != nil {
			err = y.Wait(testenv.Ctx(t, 30*time.Second))
		}
		werr := w.groups[r].Wait(testenv.Ctx(t, 30*time.Second))
		if err == nil {
			err = werr
		}
		if r == 0 {
			t.Logf("rank 0: %v", err)
		}
		if !errors.Is(err, want) {
			t.Errorf("rank %d: %v, want %v", r, err, want)
		}
	}
}

// TestGatherRootsDisagree: ranks that name different roots fail, every
// one (the root's output, the others' Wait), with ErrMismatch, over both
// data paths.
func TestGatherRootsDisagree(t *testing.T) {
	const n = 3
	paths(t, n, func(t *testing.T, w *world) {
		outs := make([]*array.Array, n)
		for r := range n {
			root := 0
			if r == 2 {
				root = 1
			}
			var err error
			outs[r], err = w.groups[r].Gather(w.s[r], fromFloat64(t, w.s[r], gpu.Float32, []float64{1, 2}, 2), root)
			if err != nil {
				t.Fatal(err)
			}
		}
		failsEverywhere(t, w, outs, collectives.ErrMismatch)
	})
}

// TestReduceOpsDisagree: ranks that reduce by different ops fail, every
// one, with ErrMismatch.
func TestReduceOpsDisagree(t *testing.T) {
	const n = 3
	paths(t, n, func(t *testing.T, w *world) {
		outs := make([]*array.Array, n)
		for r := range n {
			op := collectives.Sum
			if r == 1 {
				op = collectives.Max
			}
			var err error
			outs[r], err = w.groups[r].Reduce(w.s[r], fromFloat64(t, w.s[r], gpu.Float32, []float64{1, 2}, 2), op, 0)
			if err != nil {
				t.Fatal(err)
			}
		}
		failsEverywhere(t, w, outs, collectives.ErrMismatch)
	})
}

// TestScatterRootsDisagree: ranks that name different roots fail, every
// one, with ErrMismatch.
func TestScatterRootsDisagree(t *testing.T) {
	const n = 3
	paths(t, n, func(t *testing.T, w *world) {
		outs := make([]*array.Array, n)
		for r := range n {
			var err error
			outs[r], err = w.groups[r].Scatter(w.s[r], fromFloat64(t, w.s[r], gpu.Float32, make([]float64, 2*n), n, 2), r%2)
			if err != nil {
				t.Fatal(err)
			}
		}
		failsEverywhere(t, w, outs, collectives.ErrMismatch)
	})
}

// TestBatchShapesDisagree: a batched send and the receive that meets it
// with another shape both fail with ErrShapeMismatch.
func TestBatchShapesDisagree(t *testing.T) {
	paths(t, 2, func(t *testing.T, w *world) {
		x := fromFloat64(t, w.s[0], gpu.Float32, []float64{1, 2, 3, 4}, 4)
		if _, err := w.groups[0].Batch(w.s[0], collectives.SendOp(x, 1)); err != nil {
			t.Fatal(err)
		}
		ys, err := w.groups[1].Batch(w.s[1], collectives.RecvOp([]int{5}, gpu.Float32, 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := ys[0].Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrShapeMismatch) {
			t.Errorf("receive: %v, want ErrShapeMismatch", err)
		}
		if err := w.groups[0].Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrShapeMismatch) {
			t.Errorf("send: %v, want ErrShapeMismatch", err)
		}
	})
}

// TestAllToAllVNothingAtAll: an all-to-all in which no rank sends
// anything completes, with outputs of no rows.
func TestAllToAllVNothingAtAll(t *testing.T) {
	const n = 3
	paths(t, n, func(t *testing.T, w *world) {
		for r := range n {
			x, err := array.Full(w.s[r], []int{0, 3}, gpu.Int32, 1)
			if err != nil {
				t.Fatal(err)
			}
			y, err := w.groups[r].AllToAllV(w.s[r], x, make([]int, n), make([]int, n))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := y.Wait(testenv.Ctx(t, 30*time.Second)); err != nil || !slices.Equal(y.Shape(), []int{0, 3}) {
					t.Errorf("rank %d: shape %v: %v", r, y.Shape(), err)
				}
			}()
		}
	})
}
