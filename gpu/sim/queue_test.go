package sim_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// TestFailingCommandStopsBatch: a buffer freed while its batch waits makes
// that command fail with ErrClosed, named as "sim: <op>: command <i>", and
// the commands after it do not run; the queue goes on with the next batch.
func TestFailingCommandStopsBatch(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	gate := must[gpu.FenceWord](t)(dev.NewFenceWord())
	after := must[gpu.FenceWord](t)(dev.NewFenceWord())
	buf := must[gpu.Buffer](t)(dev.Alloc(64, gpu.DeviceMem))
	keep := must[gpu.Buffer](t)(dev.Alloc(64, gpu.DeviceMem))
	done := make(chan error, 2)
	if err := q.Submit([]gpu.Command{
		gpu.WaitValue{Word: gate, Value: 1},
		gpu.Fill{Dst: keep, DType: gpu.Int8, N: 1, Value: gpu.Int(1)},
		gpu.Add{Dst: keep, A: keep, B: buf, DType: gpu.Int8, N: 8},
		gpu.WriteValue{Word: after, Value: 1},
	}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := q.Submit([]gpu.Command{gpu.WriteValue{Word: after, Value: 2}},
		func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := buf.Free(); err != nil {
		t.Fatal(err)
	}
	gate.Store(1)
	err := waitDone(t, done)
	if !errors.Is(err, gpu.ErrClosed) || !strings.HasPrefix(err.Error(), "sim: add: command 2: ") {
		t.Errorf("batch error %q", err)
	}
	if err := waitDone(t, done); err != nil {
		t.Errorf("next batch: %v", err)
	}
	if keep.Bytes()[0] != 1 {
		t.Error("command before the failing one did not run")
	}
	if v := after.Load(); v != 2 {
		t.Errorf("word %d: want 2 (the failed batch's write must not run, the next batch's must)", v)
	}
}

// TestSubmitErrorNamesOrigin: Submit errors say "sim: submit" and the
// command index.
func TestSubmitErrorNamesOrigin(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	buf := must[gpu.Buffer](t)(dev.Alloc(8, gpu.DeviceMem))
	err := q.Submit([]gpu.Command{
		gpu.Fill{Dst: buf, DType: gpu.Int8, N: 8, Value: gpu.Int(1)},
		gpu.Fill{Dst: buf, DType: gpu.Int8, N: 8, Value: gpu.Int(1)},
		gpu.Add{Dst: buf, A: buf, B: buf, DType: gpu.Int32, N: 3},
	}, nil)
	if !errors.Is(err, gpu.ErrBadArgument) || !strings.HasPrefix(err.Error(), "sim: submit: command 2: ") ||
		!strings.Contains(err.Error(), "add") {
		t.Errorf("error %q", err)
	}
}

// TestSubmitCopiesBatch: the caller may reuse its slice right after Submit.
func TestSubmitCopiesBatch(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	gate := must[gpu.FenceWord](t)(dev.NewFenceWord())
	buf := must[gpu.Buffer](t)(dev.Alloc(8, gpu.DeviceMem))
	done := make(chan error, 1)
	cmds := []gpu.Command{
		gpu.WaitValue{Word: gate, Value: 1},
		gpu.Fill{Dst: buf, DType: gpu.Int64, N: 1, Value: gpu.Int(7)},
	}
	if err := q.Submit(cmds, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	cmds[1] = gpu.Fill{Dst: buf, DType: gpu.Int64, N: 1, Value: gpu.Int(99)}
	gate.Store(1)
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if v := buf.Bytes()[0]; v != 7 {
		t.Errorf("buffer %d, want 7", v)
	}
}

// TestSubmitNeverBlocks: a queue blocked on a wait accepts 100000 batches
// quickly, then runs them all in order once released.
func TestSubmitNeverBlocks(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	gate := must[gpu.FenceWord](t)(dev.NewFenceWord())
	w := must[gpu.FenceWord](t)(dev.NewFenceWord())
	if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: gate, Value: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	const n = 100000
	var next atomic.Int64
	var bad atomic.Int64
	for i := range n {
		err := q.Submit([]gpu.Command{gpu.WriteValue{Word: w, Value: uint32(i + 1)}}, func(err error) {
			if err != nil || next.Add(1) != int64(i+1) {
				bad.Add(1)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if v := w.Load(); v != 0 {
		t.Fatalf("writes ran before the gate opened: %d", v)
	}
	gate.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Wait(ctx, n, nil); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if next.Load() != n || bad.Load() != 0 {
		t.Errorf("%d completions, %d out of order or failed", next.Load(), bad.Load())
	}
}

// TestCloseRacesSubmit: batches submitted while Close runs are either
// refused with ErrClosed or completed exactly once.
func TestCloseRacesSubmit(t *testing.T) {
	dev := newDev(t)
	for round := range 20 {
		q := must[gpu.Queue](t)(dev.NewQueue())
		buf := must[gpu.Buffer](t)(dev.Alloc(64, gpu.DeviceMem))
		var accepted, completed, twice atomic.Int64
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				for range 200 {
					var calls atomic.Int32
					err := q.Submit([]gpu.Command{gpu.Fill{Dst: buf, DType: gpu.Int32, N: 16, Value: gpu.Int(1)}},
						func(error) {
							if calls.Add(1) > 1 {
								twice.Add(1)
							}
							completed.Add(1)
						})
					switch {
					case err == nil:
						accepted.Add(1)
					case errors.Is(err, gpu.ErrClosed):
						return
					default:
						t.Error(err)
						return
					}
				}
			})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := q.Close(ctx); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		cancel()
		wg.Wait()
		if accepted.Load() != completed.Load() || twice.Load() != 0 {
			t.Fatalf("round %d: %d accepted, %d completions, %d repeated", round,
				accepted.Load(), completed.Load(), twice.Load())
		}
	}
}

// TestCloseExpiredIdle: Close with an expired ctx on an idle queue has
// nothing to abandon and returns nil.
func TestCloseExpiredIdle(t *testing.T) {
	dev := newDev(t)
	for range 50 {
		q := must[gpu.Queue](t)(dev.NewQueue())
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := q.Close(ctx); err != nil {
			t.Fatalf("Close of an idle queue with an expired ctx: %v", err)
		}
	}
}

// TestSustainedBacklog: a FIFO that never runs dry (batches submitted from
// inside done, so the worker always finds the next one) keeps its order.
func TestSustainedBacklog(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	w := must[gpu.FenceWord](t)(dev.NewFenceWord())
	gate := must[gpu.FenceWord](t)(dev.NewFenceWord())
	const n = 20000
	var bad atomic.Int64
	var last atomic.Uint32
	var submit func(i uint32)
	submit = func(i uint32) {
		err := q.Submit([]gpu.Command{gpu.WriteValue{Word: w, Value: i}}, func(err error) {
			if err != nil || last.Swap(i) != i-1 {
				bad.Add(1)
			}
		})
		if err != nil {
			bad.Add(1)
		}
	}
	// Start with a backlog held by a gate, then keep adding while it drains.
	if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: gate, Value: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	for i := uint32(1); i <= 3000; i++ {
		submit(i)
	}
	gate.Store(1)
	for i := uint32(3001); i <= n; i++ {
		submit(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Wait(ctx, n, nil); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if bad.Load() != 0 || last.Load() != n {
		t.Errorf("%d out of order or failed, last %d", bad.Load(), last.Load())
	}
}
