package fence_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/choreotest"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// kitRig is a GPU stream on the test backend under a Recorder, a fence on
// its device and a Watch on the stream, started before anything else runs.
type kitRig struct {
	rec *choreotest.Recorder
	s   *streams.GPU
	q   *choreotest.Queue
	f   *fence.Fence
	w   *choreotest.Watch
	ctx context.Context
}

func newKitRig(t *testing.T) *kitRig {
	t.Helper()
	rec := testenv.Recorder(t, testenv.Backend())
	rt := testenv.Runtime(t)
	s, q := testenv.RecordedStream(t, rec, rt, "s")
	f, err := testenv.Fences(t, rt).New(s.Device(), fence.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Release)
	ctx := testenv.Ctx(t, 10*time.Second)
	w, err := choreotest.NewWatch(ctx, nil, choreotest.Rank{Stream: s, Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	return &kitRig{rec: rec, s: s, q: q, f: f, w: w, ctx: ctx}
}

// TestKitFenceGPUSides: UpdateGPU puts one WriteValue of the GPU side's
// next count on the stream after the input's producer, WaitGPU one
// WaitValue of the next count; the two name different words (the GPU
// writes one, the CPU the other, so each has one writer), and the CPU
// side's Wait and Update meet them at the same counts.
func TestKitFenceGPUSides(t *testing.T) {
	r := newKitRig(t)
	in, err := array.Full(r.s, []int{4}, array.Float32, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.f.UpdateGPU(r.s, in); err != nil {
		t.Fatal(err)
	}
	out := guarded(t, r.s, r.f)
	if err := r.f.Wait(r.ctx); err != nil { // the GPU's update has landed
		t.Fatal(err)
	}
	if err := r.f.Update(); err != nil { // lets the GPU's wait pass
		t.Fatal(err)
	}
	if err := out.Wait(r.ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.w.Expect(r.ctx, choreotest.Plan{GPU: []string{"fill", "update", "wait"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := r.q.Details(), []string{"fill(float32 x4)", "update(1)", "wait(2)"}; !slices.Equal(got, want) {
		t.Fatalf("commands %v, want %v", got, want)
	}
	cmds := r.q.Commands()
	upd, wait := cmds[1].(gpu.WriteValue), cmds[2].(gpu.WaitValue)
	if upd.Word == wait.Word {
		t.Fatal("the GPU's update and the GPU's wait name one word: it would have two writers")
	}
	if got, want := choreotest.FenceSteps(r.f.Trace()), "gpu.update(1) gpu.wait(2) cpu.wait(1) cpu.update(2)"; got != want {
		t.Fatalf("trace %q, want %q", got, want)
	}
}

// TestKitFenceUpdateAfterFailedCommand: UpdateGPUAfter enqueues its
// commands and the update as one unit; when one of them fails the update
// does not run and the fence fails, so the CPU side's Wait returns the
// release at once instead of taking the update for the commands' success.
func TestKitFenceUpdateAfterFailedCommand(t *testing.T) {
	testenv.NeedsRunTimeFailure(t)
	r := newKitRig(t)
	open, err := choreotest.Hold(r.s)
	if err != nil {
		t.Fatal(err)
	}
	defer open()
	gone, err := r.rec.Alloc(16, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	fill := gpu.Fill{Dst: gone, DType: gpu.Int32, N: 4, Value: gpu.Int(1)}
	if err := r.f.UpdateGPUAfter(r.s, nil, []gpu.Command{fill}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	_ = gone.Free() // the queued fill now fails when it runs
	open()
	if err := <-done; err == nil {
		t.Fatal("the fill of a freed buffer succeeded")
	}
	if err := r.f.Wait(r.ctx); !errors.Is(err, fence.ErrReleased) {
		t.Fatalf("cpu wait after the failed unit: %v, want ErrReleased", err)
	}
	if err := r.w.Expect(r.ctx, choreotest.Plan{GPU: []string{"wait", "fill+update"}}); err != nil {
		t.Fatal(err)
	}
	bs := r.q.Batches()
	last := bs[len(bs)-1]
	if !last.Completed || last.Err == nil {
		t.Fatalf("the unit's batch: completed %v, err %v", last.Completed, last.Err)
	}
}

// TestKitFenceFailReleasesGPUWait: a GPU-side wait whose CPU update never
// comes passes once the fence fails, and the output it guards fails
// with the cause; the stream got the wait and nothing else.
func TestKitFenceFailReleasesGPUWait(t *testing.T) {
	r := newKitRig(t)
	out := guarded(t, r.s, r.f)
	cause := errors.New("peer lost")
	r.f.Fail(cause)
	if err := out.Event().Wait(r.ctx); err != nil {
		t.Fatalf("the GPU wait did not pass after Fail: %v", err)
	}
	if err := out.Err(); !errors.Is(err, fence.ErrReleased) || !errors.Is(err, cause) {
		t.Fatalf("guarded output: %v", err)
	}
	if err := r.w.Expect(r.ctx, choreotest.Plan{GPU: []string{"wait"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := r.q.Details(), []string{"wait(1)"}; !slices.Equal(got, want) {
		t.Fatalf("commands %v, want %v", got, want)
	}
}
