//go:build linux

package cuda

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/cuda/nccl"
)

// needEngine opens a device with an NCCL engine, skipping where there is
// no GPU or no NCCL library.
func needEngine(t *testing.T) *Device {
	t.Helper()
	d := openDev(t, Options{})
	if _, err := nccl.Version(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	return d
}

// oneRankEngine makes a one-rank engine, bounded by 30 s.
func oneRankEngine(t *testing.T, d *Device) gpu.Engine {
	t.Helper()
	id, err := d.NewEngineID()
	if err != nil {
		t.Fatalf("NewEngineID: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	e, err := d.NewEngine(ctx, id, 1, 0)
	if err != nil {
		t.Fatalf("NewEngine after %v: %v", time.Since(start), err)
	}
	t.Logf("engine made in %v", time.Since(start))
	return e
}

// blockedQueue returns a queue held at a wait on a word that release
// raises (as a rank's GPU stream is held by the collectives' fences while
// its engine works).
func blockedQueue(t *testing.T, d *Device) (release func()) {
	t.Helper()
	q, err := d.NewQueue()
	if err != nil {
		t.Fatal(err)
	}
	w, err := d.NewFenceWord()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: w, Value: 1}}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	return func() {
		w.Store(1)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("blocked queue: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("blocked queue did not drain")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Close(ctx)
		w.Free()
	}
}

// engineAllReduce all-reduces n float32 ones on e and checks the sum.
func engineAllReduce(t *testing.T, d *Device, e gpu.Engine, n int) {
	t.Helper()
	in, err := d.Alloc(4*n, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Free()
	out, err := d.Alloc(4*n, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Free()
	if err := e.AllReduce(in, out, n, gpu.Float32, gpu.OpSum); err != nil {
		t.Fatalf("AllReduce: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// The engine is made and runs a collective; NewEngineID, NewEngine and
// the calls refuse what they must.
func TestEngine(t *testing.T) {
	d := needEngine(t)
	e := oneRankEngine(t, d)
	engineAllReduce(t, d, e, 1<<20)
	if !d.EngineSupports(gpu.Float32) || d.EngineSupports(gpu.Int16) {
		t.Error("EngineSupports: float32 must be, int16 must not be")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := d.NewEngine(ctx, []byte{1, 2}, 1, 0); !errors.Is(err, gpu.ErrBadArgument) {
		t.Errorf("NewEngine with a short id: %v, want ErrBadArgument", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	in, _ := d.Alloc(4, gpu.DeviceMem)
	defer in.Free()
	if err := e.AllReduce(in, in, 1, gpu.Float32, gpu.OpSum); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("AllReduce after Close: %v, want ErrClosed", err)
	}
}

// An engine's first collective sets up its connections, which waits for
// the device's streams; afterwards a stream of the device held at a fence
// wait (the collectives hold the rank's GPU stream while the engine works)
// keeps none of its collectives from completing. So the engine is made,
// and warmed up, before a collective holds a stream.
func TestEngineBesideABlockedStream(t *testing.T) {
	d := needEngine(t)
	e := oneRankEngine(t, d)
	defer e.Close()
	engineAllReduce(t, d, e, 1) // the warm-up
	release := blockedQueue(t, d)
	defer release()
	for _, n := range []int{1, 1 << 20, 16 << 20} {
		start := time.Now()
		engineAllReduce(t, d, e, n)
		t.Logf("all-reduce of %d floats beside a blocked stream: %v", n, time.Since(start))
	}
}
