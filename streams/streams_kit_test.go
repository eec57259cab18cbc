package streams_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/choreotest"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// kitStream is a GPU stream on the test backend under a Recorder, and the
// queue that records it.
func kitStream(t *testing.T) (*choreotest.Recorder, *streams.GPU, *choreotest.Queue) {
	t.Helper()
	rec := testenv.Recorder(t, testenv.Backend())
	rt := testenv.Runtime(t)
	s, q := testenv.RecordedStream(t, rec, rt, "s")
	return rec, s, q
}

// TestKitGPUStreamCommands: the array ops reach the device as one unit per
// Enqueue, in enqueue order; a read of device memory the CPU cannot see is
// staged by a copy on the same stream.
func TestKitGPUStreamCommands(t *testing.T) {
	rec, s, q := kitStream(t)
	ctx := testenv.Ctx(t, 10*time.Second)
	a, err := array.Full(s, []int{4}, array.Float32, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := array.Arange(s, 4, array.Float32, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := array.Add(s, a, b)
	if err != nil {
		t.Fatal(err)
	}
	d, err := array.Scale(s, c, 2)
	if err != nil {
		t.Fatal(err)
	}
	// One Enqueue of two commands is one unit.
	if _, err := s.Enqueue([]gpu.Command{
		gpu.Fill{Dst: a.Buffer(), DType: gpu.Float32, N: 4, Value: gpu.Float(0)},
		gpu.Scale{Dst: a.Buffer(), Src: a.Buffer(), DType: gpu.Float32, N: 4, Factor: gpu.Float(3)},
	}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := array.ToSlice[float32](ctx, d)
	if err != nil || !slices.Equal(got, []float32{2, 4, 6, 8}) {
		t.Fatalf("values %v %v", got, err)
	}
	want := []string{"fill", "arange", "add", "scale", "fill+scale"}
	if !rec.Properties().HostVisibleDeviceMem {
		want = append(want, "copy-d2h")
	}
	if err := s.Last().Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if units := q.Units(); !slices.Equal(units, want) {
		t.Fatalf("units %v, want %v", units, want)
	}
}

// TestKitGPUStreamUnitFailsAlone: a command that fails skips the rest of
// its own Enqueue only; the queue got one unit per Enqueue, and the next
// unit ran.
func TestKitGPUStreamUnitFailsAlone(t *testing.T) {
	testenv.NeedsRunTimeFailure(t)
	rec, s, q := kitStream(t)
	ctx := testenv.Ctx(t, 10*time.Second)
	gone, err := rec.Alloc(16, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	open, err := choreotest.Hold(s) // nothing below runs before open
	if err != nil {
		t.Fatal(err)
	}
	defer open()
	ok, err := array.New(s, []int{4}, array.Int32)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	if _, err := s.Enqueue([]gpu.Command{
		gpu.Fill{Dst: gone, DType: gpu.Int32, N: 4, Value: gpu.Int(1)},
		gpu.Fill{Dst: ok.Buffer(), DType: gpu.Int32, N: 4, Value: gpu.Int(1)},
	}, func(err error) { errs <- err }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue([]gpu.Command{
		gpu.Fill{Dst: ok.Buffer(), DType: gpu.Int32, N: 4, Value: gpu.Int(2)},
	}, func(err error) { errs <- err }); err != nil {
		t.Fatal(err)
	}
	_ = gone.Free() // named by a queued command: that command fails when it runs
	open()
	if first, second := <-errs, <-errs; first == nil || second != nil {
		t.Fatalf("outcomes %v, %v: want the first unit alone to fail", first, second)
	}
	ok.SetEvent(s.Last())
	got, err := array.ToSlice[int32](ctx, ok)
	if err != nil || !slices.Equal(got, []int32{2, 2, 2, 2}) {
		t.Fatalf("values %v %v: the second command of the failed unit must not run, the next unit must", got, err)
	}
	units := q.Units()
	if len(units) < 3 || !slices.Equal(units[:3], []string{"wait", "fill+fill", "fill"}) {
		t.Fatalf("units %v", units)
	}
}

// TestKitGPUStreamEnqueueOrder: concurrent callers' Enqueues reach the
// device each as one unit of its own commands, whole and in the order
// they were given, every caller's in its own order; the GPU-side
// waits among them hold nothing back once their word is reached.
func TestKitGPUStreamEnqueueOrder(t *testing.T) {
	rec, s, q := kitStream(t)
	ctx := testenv.Ctx(t, 10*time.Second)
	const callers, calls = 4, 50
	w, err := rec.NewFenceWord()
	if err != nil {
		t.Fatal(err)
	}
	w.Store(calls) // every wait below passes
	defer w.Free()
	bufs := make([]gpu.Buffer, callers)
	for c := range bufs {
		if bufs[c], err = rec.Alloc(64, gpu.DeviceMem); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = bufs[c].Free() }()
	}
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				cmds := []gpu.Command{
					gpu.Fill{Dst: bufs[c], DType: gpu.Int32, N: 16, Value: gpu.Int(int64(c))},
					gpu.WaitValue{Word: w, Value: uint32(i)},
					gpu.Scale{Dst: bufs[c], Src: bufs[c], DType: gpu.Int32, N: 16, Factor: gpu.Int(int64(i))},
				}
				if _, err := s.Enqueue(cmds, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := s.Last().Wait(ctx); err != nil {
		t.Fatal(err)
	}
	next := make([]int, callers) // each caller's next call
	units := 0
	for _, b := range q.Batches() {
		if b.Err != nil {
			t.Fatalf("batch failed: %v", b.Err)
		}
		for _, u := range b.Units() {
			units++
			if got := strings.Join(choreotestSteps(u), "+"); got != "fill+wait+scale" {
				t.Fatalf("unit %d is %s: an Enqueue's commands were split or mixed with another's", units, got)
			}
			c := int(u[0].(gpu.Fill).Value.Int64())
			i := int(u[1].(gpu.WaitValue).Value)
			if u[2].(gpu.Scale).Dst != bufs[c] || i != next[c] {
				t.Fatalf("unit %d: caller %d's call %d, want its call %d", units, c, i, next[c])
			}
			next[c]++
		}
	}
	if units != callers*calls {
		t.Fatalf("%d units, want %d", units, callers*calls)
	}
}

func choreotestSteps(cmds []gpu.Command) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = choreotest.Step(c)
	}
	return out
}

// TestKitCommStreamTasks: a comm stream runs its tasks one at a time in
// submission order, each task's Done before the next task runs, a failed
// task's error reaching its Done; a Watch counts the tasks.
func TestKitCommStreamTasks(t *testing.T) {
	rt := testenv.Runtime(t)
	ctx := testenv.Ctx(t, 10*time.Second)
	c, err := streams.NewComm(rt, "kit")
	if err != nil {
		t.Fatal(err)
	}
	p, err := choreotest.NewProbe(rt.ActorSystem(), "tasks")
	if err != nil {
		t.Fatal(err)
	}
	w, err := choreotest.NewWatch(ctx, nil, choreotest.Rank{Comm: c})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	for _, name := range []string{"a", "b", "c"} {
		err := c.Submit(streams.Task{Name: name,
			Run: func(context.Context) error {
				p.Send(p.PID(), "run "+name)
				if name == "b" {
					return boom
				}
				return nil
			},
			Done: func(err error) { p.Send(p.PID(), fmt.Sprintf("done %s: %v", name, errors.Is(err, boom))) },
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Expect(ctx, "run a", "done a: false", "run b", "done b: true", "run c", "done c: false"); err != nil {
		t.Fatal(err)
	}
	if err := w.Expect(ctx, choreotest.Plan{Tasks: 3}); err != nil {
		t.Fatal(err)
	}
	if c.Pending() != 0 {
		t.Fatalf("pending %d", c.Pending())
	}
}

// filler is a user's actor that drives a GPU stream: asked to fill, it
// enqueues the fill and tells the asker once it has run.
type filler struct {
	s   *streams.GPU
	out *array.Array
}

type fillReq struct{ v float64 }
type filled struct {
	v   float64
	err error
}

func (f *filler) Receive(c actor.Context) {
	m, ok := c.Message().(fillReq)
	if !ok {
		return
	}
	sender, sys := c.Sender(), c.ActorSystem()
	_, err := f.s.Enqueue([]gpu.Command{gpu.Fill{Dst: f.out.Buffer(), DType: gpu.Float32, N: f.out.Size(), Value: gpu.Float(m.v)}},
		func(err error) { sys.Root.Send(sender, filled{m.v, err}) })
	if err != nil {
		c.Respond(filled{m.v, err})
	}
}

// TestKitUserActorDrivesStream: a user's actor under test, checked by its
// replies (a probe) and by what reached the device (the recorder).
func TestKitUserActorDrivesStream(t *testing.T) {
	_, s, q := kitStream(t)
	ctx := testenv.Ctx(t, 10*time.Second)
	out, err := array.New(s, []int{3}, array.Float32)
	if err != nil {
		t.Fatal(err)
	}
	sys := testenv.Runtime(t).ActorSystem() // a second runtime: actors and streams need not share one
	p, err := choreotest.NewProbe(sys, "filler")
	if err != nil {
		t.Fatal(err)
	}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &filler{s: s, out: out} }))
	p.Request(pid, fillReq{1})
	p.Request(pid, fillReq{4})
	if err := p.Expect(ctx, filled{1, nil}, filled{4, nil}); err != nil {
		t.Fatal(err)
	}
	if got := q.Details(); !slices.Equal(got, []string{"fill(float32 x3)", "fill(float32 x3)"}) {
		t.Fatalf("device got %v", got)
	}
	out.SetEvent(s.Last())
	if got, err := array.ToSlice[float32](ctx, out); err != nil || got[2] != 4 {
		t.Fatalf("values %v %v", got, err)
	}
}
