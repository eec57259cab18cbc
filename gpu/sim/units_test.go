package sim_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// TestUnitFreedWhileQueued: a buffer freed after SubmitUnits, while the
// batch waits behind an earlier WaitValue, fails only its unit when the
// batch runs: the units around it run, done gets a *gpu.BatchError
// naming that unit and command, and the queue goes on.
func TestUnitFreedWhileQueued(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	gate := must[gpu.FenceWord](t)(dev.NewFenceWord())
	w := must[gpu.FenceWord](t)(dev.NewFenceWord())
	a := must[gpu.Buffer](t)(dev.Alloc(8, gpu.DeviceMem))
	c := must[gpu.Buffer](t)(dev.Alloc(8, gpu.DeviceMem))
	victim := must[gpu.Buffer](t)(dev.Alloc(8, gpu.DeviceMem))
	fill := func(b gpu.Buffer, v int64) gpu.Command {
		return gpu.Fill{Dst: b, DType: gpu.Int64, N: 1, Value: gpu.Int(v)}
	}
	done := make(chan error, 2)
	if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: gate, Value: 1}}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := q.SubmitUnits([]gpu.Command{
		fill(a, 1),                                         // unit 0
		fill(victim, 2), gpu.WriteValue{Word: w, Value: 9}, // unit 1
		fill(c, 3), gpu.WriteValue{Word: w, Value: 1}, // unit 2
	}, []int{1, 3, 5}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := victim.Free(); err != nil {
		t.Fatal(err)
	}
	gate.Store(1)
	if err := waitDone(t, done); err != nil {
		t.Fatalf("holding batch: %v", err)
	}
	err := waitDone(t, done)
	var be *gpu.BatchError
	if !errors.As(err, &be) || len(be.Units) != 1 || be.Units[0].Unit != 1 || be.Units[0].Command != 1 {
		t.Fatalf("done got %v, want a BatchError of unit 1 at command 1", err)
	}
	if !errors.Is(err, gpu.ErrClosed) || !strings.Contains(err.Error(), "unit 1, command 1: sim: fill: command 1: ") {
		t.Errorf("error %q", err)
	}
	if a.Bytes()[0] != 1 || c.Bytes()[0] != 3 {
		t.Errorf("units 0 and 2 did not run: %d, %d", a.Bytes()[0], c.Bytes()[0])
	}
	if v := w.Load(); v != 1 {
		t.Errorf("word %d, want 1 (unit 1's write skipped, unit 2's run)", v)
	}
	if err := q.SubmitUnits([]gpu.Command{fill(a, 4)}, []int{1}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := waitDone(t, done); err != nil || a.Bytes()[0] != 4 {
		t.Errorf("next batch: %v, a = %d", err, a.Bytes()[0])
	}
}

// TestOneUnitErrorIsPlain: Submit, and SubmitUnits with empty ends, report
// a failed command as a plain error, as before units existed; with ends
// (even one unit) the error is a *gpu.BatchError.
func TestOneUnitErrorIsPlain(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	gate := must[gpu.FenceWord](t)(dev.NewFenceWord())
	for _, ends := range [][]int{nil, {}, {2}} {
		buf := must[gpu.Buffer](t)(dev.Alloc(8, gpu.DeviceMem))
		done := make(chan error, 1)
		if err := q.SubmitUnits([]gpu.Command{
			gpu.WaitValue{Word: gate, Value: 1},
			gpu.Fill{Dst: buf, DType: gpu.Int8, N: 1, Value: gpu.Int(1)},
		}, ends, func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		_ = buf.Free()
		gate.Store(1)
		err := waitDone(t, done)
		var be *gpu.BatchError
		if got, want := errors.As(err, &be), len(ends) > 0; got != want || !errors.Is(err, gpu.ErrClosed) {
			t.Errorf("ends %v: error %v (%T), want a BatchError: %v", ends, err, err, want)
		}
		gate.Reset()
	}
}

// TestUnitsAbortFailsWholeBatch: a batch of units cut short by Close
// fails as a whole, with a plain error wrapping ErrClosed.
func TestUnitsAbortFailsWholeBatch(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	gate := must[gpu.FenceWord](t)(dev.NewFenceWord())
	w := must[gpu.FenceWord](t)(dev.NewFenceWord())
	done := make(chan error, 1)
	if err := q.SubmitUnits([]gpu.Command{
		gpu.WriteValue{Word: w, Value: 1},
		gpu.WaitValue{Word: gate, Value: 1}, gpu.WriteValue{Word: w, Value: 2},
	}, []int{1, 3}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close: %v", err)
	}
	err := waitDone(t, done)
	var be *gpu.BatchError
	if errors.As(err, &be) || !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("done got %v (%T), want a plain error wrapping ErrClosed", err, err)
	}
}

// TestSubmitUnitsCopiesEnds: the caller may reuse its ends right after
// SubmitUnits; recycled ends never leak into a later batch.
func TestSubmitUnitsCopiesEnds(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	gate := must[gpu.FenceWord](t)(dev.NewFenceWord())
	buf := must[gpu.Buffer](t)(dev.Alloc(8, gpu.DeviceMem))
	gone := must[gpu.Buffer](t)(dev.Alloc(8, gpu.DeviceMem))
	_ = gone.Free()
	fill := func(b gpu.Buffer, v int64) gpu.Command {
		return gpu.Fill{Dst: b, DType: gpu.Int8, N: 1, Value: gpu.Int(v)}
	}
	done := make(chan error, 3)
	ends := []int{1, 2}
	if err := q.SubmitUnits([]gpu.Command{gpu.WaitValue{Word: gate, Value: 1}, fill(gone, 1)}, ends,
		func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	ends[0] = 2 // one unit, if the queue kept the caller's slice
	gate.Store(1)
	if err := waitDone(t, done); gpu.UnitErr(err, 0) != nil || gpu.UnitErr(err, 1) == nil {
		t.Errorf("first batch: %v, want unit 1 failed alone", err)
	}
	for round := range 3 {
		if err := q.SubmitUnits([]gpu.Command{fill(gone, 1), fill(buf, int64(round)), fill(buf, 7)}, []int{1, 3},
			func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		err := waitDone(t, done)
		var be *gpu.BatchError
		if !errors.As(err, &be) || len(be.Units) != 1 || be.Units[0].Unit != 0 || buf.Bytes()[0] != 7 {
			t.Fatalf("round %d: %v, buffer %d", round, err, buf.Bytes()[0])
		}
	}
}

// TestSubmitUnitsForeignNotHidden: in a batch of units, a freed buffer is
// accepted but never hides a foreign one named by the same command.
func TestSubmitUnitsForeignNotHidden(t *testing.T) {
	d1, d2 := newDev(t), newDev(t)
	q := must[gpu.Queue](t)(d1.NewQueue())
	gone := must[gpu.Buffer](t)(d1.Alloc(8, gpu.DeviceMem))
	_ = gone.Free()
	foreign := must[gpu.Buffer](t)(d2.Alloc(8, gpu.DeviceMem))
	err := q.SubmitUnits([]gpu.Command{gpu.Copy{Dst: gone, Src: foreign, Bytes: 8}}, []int{1}, nil)
	if !errors.Is(err, gpu.ErrBadArgument) {
		t.Errorf("freed dst, foreign src: %v, want ErrBadArgument", err)
	}
}

// TestDonePanicsManyTimes: done callbacks that panic, batch after batch,
// leave the worker running and Device.Close working (defect D6).
func TestDonePanicsManyTimes(t *testing.T) {
	dev := must[gpu.Device](t)(gpu.Open("sim"))
	q := must[gpu.Queue](t)(dev.NewQueue())
	w := must[gpu.FenceWord](t)(dev.NewFenceWord())
	for i := range 100 {
		if err := q.Submit([]gpu.Command{gpu.WriteValue{Word: w, Value: uint32(i + 1)}},
			func(error) { panic("x") }); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	if err := q.Submit(nil, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := waitDone(t, done); err != nil || w.Load() != 100 {
		t.Errorf("batch after panicking dones: %v, word %d", err, w.Load())
	}
	if err := dev.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
