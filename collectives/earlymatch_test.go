package collectives_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// busyFor holds rank 0's stream for d (or until the test ends) and reports
// whether it has been let go.
func busyFor(t *testing.T, w *world, d time.Duration) (drained *atomic.Bool) {
	t.Helper()
	release := testenv.Hold(t, w.s[0])
	drained = new(atomic.Bool)
	timer := time.AfterFunc(d, func() {
		drained.Store(true)
		release()
	})
	t.Cleanup(func() {
		timer.Stop()
		release()
	})
	return drained
}

// earlyPaths are the data paths the early match is tested on; the backend
// (CHOREO_BACKEND) decides whether the host path stages device memory.
var earlyPaths = []collectives.DataPath{collectives.DataPathStaged, collectives.DataPathDevice}

// TestMismatchBehindBusyStream: a mismatched all-reduce whose input is
// queued behind a GPU stream kept busy for a long time fails while that
// stream is still busy, on each data path: its signature is matched with
// the peer's when both have called, not once its input is written. The
// failure must come before the stream is let go (an ordering, not a time:
// the bound is the stream's whole busy time); the other rank, whose input
// was ready, fails too.
func TestMismatchBehindBusyStream(t *testing.T) {
	const busy = 20 * time.Second
	for _, path := range earlyPaths {
		t.Run(path.String(), func(t *testing.T) {
			w := newWorld(t, 2, collectives.WithTimeout(2*busy), collectives.WithDataPath(path))
			x1, _ := array.Full(w.s[1], []int{64}, array.Int32, 1)
			if err := x1.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			drained := busyFor(t, w, busy)
			x0, _ := array.Full(w.s[0], []int{64}, array.Float32, 1) // written once the stream is let go
			t0 := time.Now()
			y0, err := w.groups[0].AllReduce(w.s[0], x0, collectives.Sum)
			if err != nil {
				t.Fatal(err)
			}
			y1, err := w.groups[1].AllReduce(w.s[1], x1, collectives.Sum)
			if err != nil {
				t.Fatal(err)
			}
			err = y0.Wait(testenv.Ctx(t, 2*busy))
			took, held := time.Since(t0), !drained.Load()
			t.Logf("%s: the mismatch reached the waiting rank's output %v after its call (stream busy for %v)", path, took, busy)
			if !errors.Is(err, collectives.ErrShapeMismatch) || errors.Is(err, collectives.ErrTimeout) {
				t.Fatalf("waiting rank: %v, want ErrShapeMismatch (not the deadline)", err)
			}
			if !held {
				t.Fatalf("the mismatch was found only after the stream was let go (%v)", took)
			}
			if err := y1.Wait(testenv.Ctx(t, 2*busy)); !errors.Is(err, collectives.ErrMismatch) || drained.Load() {
				t.Fatalf("ready rank: %v (stream let go: %v), want ErrMismatch while the stream is busy", err, drained.Load())
			}
		})
	}
}

// TestMatchBehindBusyStream is TestMismatchBehindBusyStream's false-positive
// twin: matching all-reduces behind the same busy stream are not failed
// while they wait (the ranks called alike), and once the stream is let go
// they give the exact sum.
func TestMatchBehindBusyStream(t *testing.T) {
	const busy = time.Second
	for _, path := range earlyPaths {
		t.Run(path.String(), func(t *testing.T) {
			w := newWorld(t, 2, collectives.WithTimeout(30*time.Second), collectives.WithDataPath(path))
			x1, _ := array.Full(w.s[1], []int{64}, array.Float32, 2)
			if err := x1.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			drained := busyFor(t, w, busy)
			x0, _ := array.Full(w.s[0], []int{64}, array.Float32, 1)
			y0, err := w.groups[0].AllReduce(w.s[0], x0, collectives.Sum)
			if err != nil {
				t.Fatal(err)
			}
			y1, err := w.groups[1].AllReduce(w.s[1], x1, collectives.Sum)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(busy / 2) // both ranks have called and compared
			for r, y := range []*array.Array{y0, y1} {
				if err := y.Err(); err != nil && !drained.Load() {
					t.Fatalf("rank %d failed while its peer waited behind the busy stream: %v", r, err)
				}
			}
			for r, y := range []*array.Array{y0, y1} {
				v, err := array.ToSlice[float32](testenv.Ctx(t, 30*time.Second), y)
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				for i, e := range v {
					if e != 3 {
						t.Fatalf("rank %d element %d = %v, want 3", r, i, e)
					}
				}
			}
			if !drained.Load() {
				t.Fatal("the outputs were ready before the stream their input waited on was let go")
			}
		})
	}
}
