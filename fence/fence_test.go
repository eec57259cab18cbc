package fence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

type rig struct {
	rt  *actors.Runtime
	dev gpu.Device
	s   *streams.GPU
}

func newRig(t *testing.T, opts ...actors.Option) *rig {
	t.Helper()
	dev := testenv.Device(t)
	rt := testenv.Runtime(t, opts...)
	s := testenv.Stream(t, rt, dev)
	return &rig{rt: rt, dev: dev, s: s}
}

// guarded returns an output that f's GPU-side wait on s guards: it is
// ready once the stream has passed the wait.
func guarded(t *testing.T, s *streams.GPU, f *fence.Fence) *array.Array {
	t.Helper()
	out, err := array.New(s, []int{4}, array.Float32)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := f.WaitGPU(s, out)
	if err != nil {
		t.Fatal(err)
	}
	out.SetEvent(ev)
	return out
}

// blocker holds stream s until the returned func is called.
func blocker(t *testing.T, r *rig) func() {
	t.Helper()
	w, err := r.dev.NewFenceWord()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.s.Enqueue([]gpu.Command{gpu.WaitValue{Word: w, Value: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Store(gpu.StopValue) })
	return func() { w.Store(1) }
}

// choreography runs one of the four shapes (allreduce, allgather, send,
// recv) the way a collective does: the GPU side first, then the comm task.
// Send has no GPU-side wait; recv has no GPU-side update.
func choreography(t *testing.T, r *rig, shape string, withEvent bool) []fence.Step {
	t.Helper()
	f, err := testenv.Fences(t, r.rt).New(r.dev, fence.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	in, err := array.Full(r.s, []int{8}, array.Float32, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !withEvent {
		if err := in.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		in.SetEvent(streams.Event{})
	}
	hasEvent := !in.Ready() // decided once, drives both sides
	if withEvent && !hasEvent {
		// The fill already completed: force the flag the test asked for.
		hasEvent = true
	}
	out, err := array.New(r.s, []int{8}, array.Float32)
	if err != nil {
		t.Fatal(err)
	}
	gpuUpdate := hasEvent && shape != "recv"
	gpuWait := shape != "send"
	if gpuUpdate {
		if err := f.UpdateGPU(r.s, in); err != nil {
			t.Fatal(err)
		}
	}
	if gpuWait {
		ev, err := f.WaitGPU(r.s, out)
		if err != nil {
			t.Fatal(err)
		}
		out.SetEvent(ev)
	}
	done := make(chan error, 1)
	err = testenv.DefaultComm(t, r.rt).Submit(streams.Task{Name: shape, Run: func(ctx context.Context) error {
		if gpuUpdate {
			if err := f.Wait(ctx); err != nil {
				return err
			}
		}
		if shape != "send" {
			src := in.Buffer().Bytes()
			if shape == "recv" { // no input: the data comes from the wire
				src = make([]byte, len(src))
				for i := 0; i < len(src); i += 4 {
					copy(src[i:], []byte{0, 0, 0, 0x40}) // 2.0f
				}
			}
			copy(out.Buffer().Bytes(), src)
			if err := f.Update(); err != nil {
				return err
			}
		}
		return nil
	}, Done: func(err error) {
		if err != nil {
			f.Fail(err)
		} else {
			f.Release()
		}
		done <- err
	}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("choreography hung")
	}
	if gpuWait {
		got, err := array.ToSlice[float32](testenv.Ctx(t, 5*time.Second), out)
		if err != nil || (out.Buffer().Bytes() != nil && got[7] != 2) {
			t.Fatalf("%s output: %v %v", shape, got, err)
		}
	}
	return f.Trace()
}

// TestTimelines: each side counts its own calls and uses the count as the
// value, so each shape, with and without an input event, records exactly
// the expected (side, op, value) sequence.
func TestTimelines(t *testing.T) {
	r := newRig(t)
	gu := func(v uint32) fence.Step { return fence.Step{Side: fence.GPUSide, Op: fence.OpUpdate, Value: v} }
	gw := func(v uint32) fence.Step { return fence.Step{Side: fence.GPUSide, Op: fence.OpWait, Value: v} }
	cu := func(v uint32) fence.Step { return fence.Step{Side: fence.CPUSide, Op: fence.OpUpdate, Value: v} }
	cw := func(v uint32) fence.Step { return fence.Step{Side: fence.CPUSide, Op: fence.OpWait, Value: v} }
	cases := []struct {
		shape string
		event bool
		want  []fence.Step
	}{
		{"allreduce", true, []fence.Step{gu(1), gw(2), cw(1), cu(2)}},
		{"allreduce", false, []fence.Step{gw(1), cu(1)}},
		{"allgather", true, []fence.Step{gu(1), gw(2), cw(1), cu(2)}},
		{"allgather", false, []fence.Step{gw(1), cu(1)}},
		{"send", true, []fence.Step{gu(1), cw(1)}},
		{"send", false, nil},
		{"recv", true, []fence.Step{gw(1), cu(1)}},
		{"recv", false, []fence.Step{gw(1), cu(1)}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/event=%v", c.shape, c.event), func(t *testing.T) {
			got := choreography(t, r, c.shape, c.event)
			if !slices.Equal(got, c.want) {
				t.Fatalf("trace %v, want %v", got, c.want)
			}
		})
	}
}

// TestOneOwner passes the handle through a channel, an actor message, a
// closure and retries, collecting garbage in between: nothing releases the
// fence early, and the GPU waiter stays blocked until the comm side's Update.
func TestOneOwner(t *testing.T) {
	r := newRig(t)
	f, err := testenv.Fences(t, r.rt).New(r.dev, fence.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	out := guarded(t, r.s, f)
	after, err := array.Scale(r.s, out, 1) // queued behind the wait
	if err != nil {
		t.Fatal(err)
	}

	type carry struct{ f *fence.Fence }
	viaChan := make(chan carry, 1)
	viaChan <- carry{f}
	f = nil // the test's own reference is gone: only the message holds it
	got := make(chan *fence.Fence, 1)
	pid := r.rt.ActorSystem().Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(carry); ok {
			run := func() *fence.Fence { return m.f } // a closure owns it now
			got <- run()
		}
	}))
	r.rt.ActorSystem().Root.Send(pid, <-viaChan)
	h := <-got
	for attempt := range 3 { // retries pass the same handle around
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		if h.Released() {
			t.Fatalf("attempt %d: fence released while still in use", attempt)
		}
		if after.Ready() || out.Ready() {
			t.Fatalf("attempt %d: GPU passed the wait before the comm side's update", attempt)
		}
	}
	visible := out.Buffer().Bytes() != nil
	if visible {
		copy(out.Buffer().Bytes(), []byte{0, 0, 0x80, 0x3f}) // 1.0f in element 0
	}
	if err := h.Update(); err != nil {
		t.Fatal(err)
	}
	h.Release()
	vals, err := array.ToSlice[float32](testenv.Ctx(t, 5*time.Second), after)
	if err != nil || (visible && vals[0] != 1) {
		t.Fatalf("after update: %v %v", vals, err)
	}
}

// TestDroppedHandleIsReleased: a handle dropped without Release is
// released by the cleanup, and the GPU goes on (with the output failed).
func TestDroppedHandleIsReleased(t *testing.T) {
	r := newRig(t)
	out, _ := array.New(r.s, []int{4}, array.Float32)
	func() {
		f, err := testenv.Fences(t, r.rt).New(r.dev)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := f.WaitGPU(r.s, out)
		if err != nil {
			t.Fatal(err)
		}
		out.SetEvent(ev)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !out.Ready() && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if _, err := array.ToSlice[float32](testenv.Ctx(t, 30*time.Second), out); !errors.Is(err, fence.ErrDropped) {
		t.Fatalf("dropped fence: output error %v, want ErrDropped", err)
	}
}

// TestCopyIsAVetError: copying a Fence by value is reported by go vet.
func TestCopyIsAVetError(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		t.Skipf("no go command at %s", gobin)
	}
	out, err := exec.Command(gobin, "vet", "./testdata/copyfence").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "copies lock") && !strings.Contains(string(out), "passes lock") {
		t.Fatalf("go vet did not report the copy (err %v):\n%s", err, out)
	}
}

// TestReleaseIsStickyAndMonotonic: a release stores the stop value once
// and lets a queued GPU wait pass; a GPU update queued before the release
// neither lowers the CPU word nor is lost; a second release changes
// nothing; Update and Wait after a release return ErrReleased.
func TestReleaseIsStickyAndMonotonic(t *testing.T) {
	r := newRig(t)
	f, err := testenv.Fences(t, r.rt).New(r.dev)
	if err != nil {
		t.Fatal(err)
	}
	gw, cw := fence.Words(f)
	unblock := blocker(t, r)
	if err := f.UpdateGPU(r.s, nil); err != nil { // queued GPU update(1)
		t.Fatal(err)
	}
	ev, err := f.WaitGPU(r.s, nil) // then a wait(2)
	if err != nil {
		t.Fatal(err)
	}
	unblockLater := blocker(t, r)
	if _, err := f.WaitGPU(r.s, nil); err != nil { // keeps the words named while we look
		t.Fatal(err)
	}
	defer unblockLater()
	f.Release()
	if got := cw.Load(); got != gpu.StopValue {
		t.Fatalf("cpu word after release = %#x", got)
	}
	unblock()
	if err := ev.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
		t.Fatalf("GPU wait(2) after release did not return: %v", err)
	}
	if got := cw.Load(); got != gpu.StopValue {
		t.Fatalf("cpu word after the queued update = %#x, want stop value", got)
	}
	if got := gw.Load(); got != 1 {
		t.Fatalf("gpu word = %d, want the queued update's 1", got)
	}
	errBefore := f.Err()
	f.Release()
	f.Fail(errors.New("second release"))
	if f.Err().Error() != errBefore.Error() || cw.Load() != gpu.StopValue {
		t.Fatalf("a second release changed the fence: %v -> %v", errBefore, f.Err())
	}
	if err := f.Update(); !errors.Is(err, fence.ErrReleased) {
		t.Fatalf("update after release: %v", err)
	}
	if err := f.Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, fence.ErrReleased) {
		t.Fatalf("wait after release: %v", err)
	}
}

// TestWordsNotReusedWhileQueued: the words of a fence released while a
// queued GPU command still names them are not handed to a new fence until
// that command has run; then they come back to the pool, reset to 0.
func TestWordsNotReusedWhileQueued(t *testing.T) {
	// A pool large enough that recycled words are kept, not freed.
	r := newRig(t)
	if _, err := fence.Start(r.rt, fence.WithPoolSize(1024)); err != nil {
		t.Fatal(err)
	}
	f, err := testenv.Fences(t, r.rt).New(r.dev)
	if err != nil {
		t.Fatal(err)
	}
	gw, cw := fence.Words(f)
	unblock := blocker(t, r)
	ev, err := f.WaitGPU(r.s, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Fail(errors.New("abandoned"))
	for range 200 {
		g, err := testenv.Fences(t, r.rt).New(r.dev)
		if err != nil {
			t.Fatal(err)
		}
		g2, c2 := fence.Words(g)
		if g2 == gw || c2 == cw || g2 == cw || c2 == gw {
			t.Fatal("a word named by a queued command was handed out again")
		}
		g.Release()
	}
	unblock()
	if err := ev.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Once the command completed, the words go back to the pool.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		g, err := testenv.Fences(t, r.rt).New(r.dev)
		if err != nil {
			t.Fatal(err)
		}
		g2, _ := fence.Words(g)
		g.Release()
		if g2 == gw {
			if v := g2.Load(); v != 0 {
				t.Fatalf("recycled word not reset: %d", v)
			}
			return
		}
	}
	t.Fatal("words never came back to the pool")
}

// TestWaitTimesOut: a Wait ends at its context's deadline. The fence's
// own deadline is far later, so a Wait that overran its context would end
// at the release instead (an error matching ErrReleased).
func TestWaitTimesOut(t *testing.T) {
	r := newRig(t)
	f, err := testenv.Fences(t, r.rt).New(r.dev, fence.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	c, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = f.Wait(c)
	if !errors.Is(err, fence.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, fence.ErrReleased) {
		t.Fatalf("wait past deadline: %v, want its context's deadline (not the fence's release)", err)
	}
}

// TestWatchdogReleasesAbandonedFence: a fence nobody updates is
// released by the watchdog at its deadline; the GPU queue behind it goes
// on, the output it guards fails with ErrTimeout and ErrReleased, and the
// fence leaves the live set.
func TestWatchdogReleasesAbandonedFence(t *testing.T) {
	r := newRig(t)
	f, err := testenv.Fences(t, r.rt).New(r.dev, fence.WithTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	out := guarded(t, r.s, f)
	next, err := array.Full(r.s, []int{2}, array.Int32, 7) // the queue must go on
	if err != nil {
		t.Fatal(err)
	}
	vals, err := array.ToSlice[int32](testenv.Ctx(t, 5*time.Second), next)
	if err != nil || vals[1] != 7 {
		t.Fatalf("GPU queue stuck behind an abandoned fence: %v %v", vals, err)
	}
	_, err = array.ToSlice[float32](testenv.Ctx(t, 30*time.Second), out)
	if !errors.Is(err, fence.ErrTimeout) || !errors.Is(err, fence.ErrReleased) || !errors.Is(err, array.ErrFailed) {
		t.Fatalf("guarded output: %v, want ErrFailed+ErrReleased+ErrTimeout", err)
	}
	// The release fails the output first, then leaves the live set.
	for deadline := time.Now().Add(30 * time.Second); testenv.Fences(t, r.rt).Live() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if testenv.Fences(t, r.rt).Live() != 0 {
		t.Fatalf("%d fences still live", testenv.Fences(t, r.rt).Live())
	}
}

func TestNormalReleaseBeforeUpdateFailsOutput(t *testing.T) {
	r := newRig(t)
	f, _ := testenv.Fences(t, r.rt).New(r.dev)
	out := guarded(t, r.s, f)
	f.Release() // the comm side never updated: the output must not look valid
	if _, err := array.ToSlice[float32](testenv.Ctx(t, 5*time.Second), out); !errors.Is(err, fence.ErrReleased) {
		t.Fatalf("output of a fence released before its update: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	r := newRig(t)
	if _, err := testenv.Fences(t, r.rt).New(nil); !errors.Is(err, gpu.ErrBadArgument) {
		t.Fatalf("nil device: %v", err)
	}
	f, _ := testenv.Fences(t, r.rt).New(r.dev)
	defer f.Release()
	if err := f.UpdateGPU(nil, nil); !errors.Is(err, gpu.ErrBadArgument) {
		t.Fatalf("nil stream: %v", err)
	}
	if _, err := f.WaitGPU(nil, nil); !errors.Is(err, gpu.ErrBadArgument) {
		t.Fatalf("nil stream: %v", err)
	}
	other := testenv.Stream(t, r.rt, r.dev)
	unblock := blocker(t, &rig{rt: r.rt, dev: r.dev, s: other})
	x, _ := array.Full(other, []int{1}, array.Float32, 1)
	if err := f.UpdateGPU(r.s, x); !errors.Is(err, fence.ErrCrossStream) {
		t.Fatalf("cross-stream input: %v", err)
	}
	unblock()
}

func TestCloseWithWorkInFlight(t *testing.T) {
	dev := testenv.Device(t)
	rt, err := actors.NewRuntime(actors.WithCloseTimeout(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s := testenv.Stream(t, rt, dev)
	f, _ := testenv.Fences(t, rt).New(dev)
	out, _ := array.New(s, []int{4}, array.Float32)
	ev, _ := f.WaitGPU(s, out)
	out.SetEvent(ev)
	taskErr := make(chan error, 1)
	_ = testenv.DefaultComm(t, rt).Submit(streams.Task{Name: "stuck", Run: func(ctx context.Context) error {
		return f.Wait(context.Background()) // no deadline of its own: only the release ends it
	}, Done: func(err error) { taskErr <- err }})
	queued := make(chan error, 1)
	_ = testenv.DefaultComm(t, rt).Submit(streams.Task{Name: "behind", Run: func(context.Context) error { return nil },
		Done: func(err error) { queued <- err }})
	time.Sleep(10 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- rt.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung with work in flight")
	}
	for name, ch := range map[string]chan error{"stuck": taskErr, "behind": queued} {
		select {
		case err := <-ch:
			if name == "stuck" && !errors.Is(err, fence.ErrReleased) {
				t.Fatalf("stuck task: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("task %s never finished", name)
		}
	}
	if _, err := array.ToSlice[float32](testenv.Ctx(t, time.Second), out); err == nil {
		t.Fatal("guarded output readable after close")
	}
	if _, err := testenv.Fences(t, rt).New(dev); !errors.Is(err, fence.ErrClosed) {
		t.Fatalf("new fence after close: %v", err)
	}
	if err := testenv.DefaultComm(t, rt).Submit(streams.Task{Name: "late", Run: func(context.Context) error { return nil }}); !errors.Is(err, streams.ErrClosed) {
		t.Fatalf("submit after close: %v", err)
	}
}
