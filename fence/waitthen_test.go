package fence_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/choreotest"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// TestKitFenceWaitGPUThen: WaitGPUThen puts the wait and the commands
// after it on the stream as one unit; they run once the CPU side's Update
// lets the wait pass, done hears their outcome, and the Event it returns
// completes after them.
func TestKitFenceWaitGPUThen(t *testing.T) {
	r := newKitRig(t)
	out, err := array.New(r.s, []int{4}, array.Int32)
	if err != nil {
		t.Fatal(err)
	}
	fill := gpu.Fill{Dst: out.Buffer(), DType: gpu.Int32, N: 4, Value: gpu.Int(5)}
	done := make(chan error, 1)
	ev, err := r.f.WaitGPUThen(r.s, out, []gpu.Command{fill}, func(err error) { done <- err })
	if err != nil {
		t.Fatal(err)
	}
	out.SetEvent(ev)
	select {
	case err := <-done:
		t.Fatalf("the commands after the wait completed (%v) before the CPU side's update", err)
	default:
	}
	if err := r.f.Update(); err != nil {
		t.Fatal(err)
	}
	got, err := array.ToSlice[int32](r.ctx, out)
	if err != nil || !slices.Equal(got, []int32{5, 5, 5, 5}) {
		t.Fatalf("values %v %v: want the fill after the wait", got, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("done: %v", err)
	}
	units := r.q.Units()
	if len(units) == 0 || units[0] != "wait+fill" {
		t.Fatalf("units %v: want the wait and the fill as one unit first", units)
	}
	if got, want := choreotest.FenceSteps(r.f.Trace()), "gpu.wait(1) cpu.update(1)"; got != want {
		t.Fatalf("trace %q, want %q", got, want)
	}
}

// TestKitFenceWaitGPUThenFailedCommand: when a command after the wait
// fails, done gets the error and the fence fails, as UpdateGPUAfter's does.
func TestKitFenceWaitGPUThenFailedCommand(t *testing.T) {
	testenv.NeedsRunTimeFailure(t)
	r := newKitRig(t)
	gone, err := r.rec.Alloc(16, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	fill := gpu.Fill{Dst: gone, DType: gpu.Int32, N: 4, Value: gpu.Int(1)}
	if _, err := r.f.WaitGPUThen(r.s, nil, []gpu.Command{fill}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	_ = gone.Free() // the queued fill now fails when it runs
	if err := r.f.Update(); err != nil {
		t.Fatal(err)
	}
	if err := testenv.Recv(t, done, 30*time.Second); err == nil {
		t.Fatal("the fill of a freed buffer succeeded")
	}
	if err := r.f.Wait(r.ctx); !errors.Is(err, fence.ErrReleased) {
		t.Fatalf("cpu wait after the failed unit: %v, want ErrReleased", err)
	}
}

// TestWaitGPUThenOnAFailedFence: on a fence already failed, WaitGPUThen
// enqueues nothing, fails the guarded output and calls done once with the
// error it returns.
func TestWaitGPUThenOnAFailedFence(t *testing.T) {
	r := newKitRig(t)
	out, err := array.New(r.s, []int{4}, array.Int32)
	if err != nil {
		t.Fatal(err)
	}
	r.f.Fail(errors.New("peer lost"))
	var calls []error
	_, err = r.f.WaitGPUThen(r.s, out, []gpu.Command{gpu.Fill{Dst: out.Buffer(), DType: gpu.Int32, N: 4, Value: gpu.Int(1)}},
		func(err error) { calls = append(calls, err) })
	if !errors.Is(err, fence.ErrReleased) {
		t.Fatalf("WaitGPUThen on a failed fence: %v, want ErrReleased", err)
	}
	if len(calls) != 1 || calls[0] != err {
		t.Fatalf("done called %d times with %v, want once with %v", len(calls), calls, err)
	}
	if !errors.Is(out.Err(), fence.ErrReleased) {
		t.Fatalf("guarded output: %v, want failed with ErrReleased", out.Err())
	}
	if units := r.q.Units(); len(units) != 0 {
		t.Fatalf("units %v on the stream, want none", units)
	}
}

// TestUpdateGPUAfterRefusedCallsDone: an UpdateGPUAfter that fails before
// it enqueues (a failed fence, a nil stream) still calls done once with
// its error, so whoever holds memory for cmds gives it back.
func TestUpdateGPUAfterRefusedCallsDone(t *testing.T) {
	r := newKitRig(t)
	var calls []error
	done := func(err error) { calls = append(calls, err) }
	err := r.f.UpdateGPUAfter(nil, nil, nil, done)
	if !errors.Is(err, gpu.ErrBadArgument) || len(calls) != 1 || calls[0] != err {
		t.Fatalf("nil stream: %v, done calls %v: want ErrBadArgument, done once with it", err, calls)
	}
	calls = nil
	r.f.Fail(errors.New("peer lost"))
	err = r.f.UpdateGPUAfter(r.s, nil, nil, done)
	if !errors.Is(err, fence.ErrReleased) || len(calls) != 1 || calls[0] != err {
		t.Fatalf("failed fence: %v, done calls %v: want ErrReleased, done once with it", err, calls)
	}
	if units := r.q.Units(); len(units) != 0 {
		t.Fatalf("units %v on the stream, want none", units)
	}
}
