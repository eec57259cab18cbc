package choreotest_test

import (
	"context"
	"errors"
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
)

func alloc(t testing.TB, dev gpu.Device, n int, kind gpu.MemKind) gpu.Buffer {
	t.Helper()
	b, err := dev.Alloc(n, kind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Free() })
	return b
}

// TestKitRecorderPassesThrough drives a recorded queue directly: accepted
// batches run on the real device and are recorded with their units and
// outcomes; a refused batch returns the device's own error and is not
// recorded; Close reaches the real queue.
func TestKitRecorderPassesThrough(t *testing.T) {
	rec := testenv.Recorder(t, testenv.Backend())
	ctx := testenv.Ctx(t, 10*time.Second)
	gq, err := rec.NewQueue()
	if err != nil {
		t.Fatal(err)
	}
	q := gq.(*choreotest.Queue)
	if q.Label() != "q0" || q.Index() != 0 || rec.Queue("q0") != q {
		t.Fatalf("first queue: label %q index %d", q.Label(), q.Index())
	}
	dev := alloc(t, rec, 16, gpu.DeviceMem)
	host := alloc(t, rec, 16, gpu.HostMem)
	fill := gpu.Fill{Dst: dev, DType: gpu.Int32, N: 4, Value: gpu.Int(7)}
	back := gpu.Copy{Dst: host, Src: dev, Bytes: 16}

	done := make(chan error, 1)
	if err := q.Submit([]gpu.Command{fill, back}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := host.Bytes()[12]; got != 7 {
		t.Fatalf("the recorded batch did not run: host byte 12 = %d", got)
	}

	// A refused batch: the device's error, unchanged, and no record.
	err = q.Submit([]gpu.Command{gpu.Fill{DType: gpu.Int32, N: 1}}, func(error) { t.Error("done of a refused batch") })
	if !errors.Is(err, gpu.ErrBadArgument) || strings.HasPrefix(err.Error(), "choreotest") {
		t.Fatalf("refused batch: %v", err)
	}

	// Units: the second unit fails (its buffer was freed), the others run.
	gone := alloc(t, rec, 16, gpu.DeviceMem)
	_ = gone.Free()
	wait := gpu.WaitValue{Word: mustWord(t, rec), Value: 0}
	if err := q.SubmitUnits([]gpu.Command{fill, gpu.Fill{Dst: gone, DType: gpu.Int32, N: 1}, back, wait},
		[]int{1, 3, 4}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	uerr := <-done
	if gpu.UnitErr(uerr, 0) != nil || gpu.UnitErr(uerr, 1) == nil || gpu.UnitErr(uerr, 2) != nil {
		t.Fatalf("unit outcomes: %v", uerr)
	}
	if err := q.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	bs := q.Batches()
	if len(bs) != 2 || !bs[0].Completed || bs[0].Err != nil || bs[0].Ends != nil ||
		!slices.Equal(bs[1].Ends, []int{1, 3, 4}) || !bs[1].Completed || bs[1].Err == nil {
		t.Fatalf("batches: %+v", bs)
	}
	if got, want := q.Units(), []string{"fill+copy-d2h", "fill", "fill+copy-d2h", "wait"}; !slices.Equal(got, want) {
		t.Fatalf("units %v, want %v", got, want)
	}
	if got, want := q.Details(), []string{"fill(int32 x4)", "copy-d2h(16B)", "fill(int32 x4)", "fill(int32 x1)",
		"copy-d2h(16B)", "wait(0)"}; !slices.Equal(got, want) {
		t.Fatalf("details %v, want %v", got, want)
	}

	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !q.Closed() {
		t.Fatal("Closed after Close")
	}
	if err := q.Submit([]gpu.Command{fill}, nil); !errors.Is(err, gpu.ErrClosed) {
		t.Fatalf("submit after close: %v", err)
	}
	if q2, err := rec.NewQueue(); err != nil || q2.(*choreotest.Queue).Label() != "q1" {
		t.Fatalf("second queue: %v", err)
	}
}

func mustWord(t testing.TB, dev gpu.Device) gpu.FenceWord {
	t.Helper()
	w, err := dev.NewFenceWord()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Free)
	return w
}

// TestKitStepNames checks the names a plan is written in.
func TestKitStepNames(t *testing.T) {
	rec := testenv.Recorder(t, testenv.Backend())
	d := alloc(t, rec, 8, gpu.DeviceMem)
	h := alloc(t, rec, 8, gpu.HostMem)
	w := mustWord(t, rec)
	cases := []struct {
		c             gpu.Command
		step, details string
	}{
		{gpu.Fill{Dst: d, DType: gpu.Float32, N: 2}, "fill", "fill(float32 x2)"},
		{gpu.Arange{Dst: d, DType: gpu.Float32, N: 2}, "arange", "arange(float32 x2)"},
		{gpu.Add{Dst: d, A: d, B: d, DType: gpu.Float32, N: 2}, "add", "add(float32 x2)"},
		{gpu.Scale{Dst: d, Src: d, DType: gpu.Float32, N: 2}, "scale", "scale(float32 x2)"},
		{gpu.Copy{Dst: h, Src: d, Bytes: 8}, "copy-d2h", "copy-d2h(8B)"},
		{gpu.Copy{Dst: d, Src: h, Bytes: 4}, "copy-h2d", "copy-h2d(4B)"},
		{gpu.Copy{Dst: d, Src: d, Bytes: 8}, "copy-d2d", "copy-d2d(8B)"},
		{gpu.Copy{Dst: h, Src: h, Bytes: 8}, "copy-h2h", "copy-h2h(8B)"},
		{gpu.WaitValue{Word: w, Value: 3}, "wait", "wait(3)"},
		{gpu.WriteValue{Word: w, Value: 4}, "update", "update(4)"},
		{&gpu.WriteValue{Word: w, Value: 4}, "update", "update"},
	}
	for _, c := range cases {
		if s, d := choreotest.Step(c.c), choreotest.Detail(c.c); s != c.step || d != c.details {
			t.Errorf("%v: step %q detail %q, want %q %q", c.c, s, d, c.step, c.details)
		}
	}
}

// TestKitLabeledView: a view's queues carry its label, its stream's device
// is the view, and closing the view leaves the device open.
func TestKitLabeledView(t *testing.T) {
	rec := testenv.Recorder(t, testenv.Backend())
	rt := testenv.Runtime(t)
	s, q := testenv.RecordedStream(t, rec, rt, "rank7")
	if q.Label() != "rank7" || rec.Queue("rank7") != q || rec.Queues()[q.Index()] != q {
		t.Fatalf("queue %v", q)
	}
	x, err := array.Full(s, []int{3}, array.Int32, 5)
	if err != nil {
		t.Fatal(err)
	}
	got, err := array.ToSlice[int32](testenv.Ctx(t, 10*time.Second), x)
	if err != nil || !slices.Equal(got, []int32{5, 5, 5}) {
		t.Fatalf("values %v %v", got, err)
	}
	want := []string{"fill"}
	if !rec.Properties().HostVisibleDeviceMem {
		want = append(want, "copy-d2h") // ToSlice stages the read
	}
	if got := q.Units(); !slices.Equal(got, want) {
		t.Fatalf("units %v, want %v", got, want)
	}
	v := rec.Labeled("other")
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Alloc(8, gpu.HostMem); !errors.Is(err, gpu.ErrClosed) {
		t.Fatalf("alloc on a closed view: %v", err)
	}
	if _, err := rec.Alloc(8, gpu.HostMem); err != nil {
		t.Fatalf("the device closed with a view: %v", err)
	}
}

// echo is a user's actor under test: it answers every string with its
// upper case, and passes every int on, doubled, to a peer it was told about.
type echo struct{ peer *actor.PID }

type setPeer struct{ pid *actor.PID }

func (e *echo) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case setPeer:
		e.peer = m.pid
	case string:
		c.Respond(strings.ToUpper(m))
	case int:
		c.Request(e.peer, m*2) // the peer sees this actor as the sender
	}
}

// TestKitProbe tests a user's actor with a probe: replies to requests,
// messages sent on, an actor's end, bounded waits and mismatch reports.
func TestKitProbe(t *testing.T) {
	rt := testenv.Runtime(t)
	sys := rt.ActorSystem()
	p, err := choreotest.NewProbe(sys, "echo")
	if err != nil {
		t.Fatal(err)
	}
	e := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &echo{} }))
	ctx := testenv.Ctx(t, 10*time.Second)

	p.Send(e, setPeer{p.PID()})
	p.Request(e, "hi")
	p.Send(e, 21)
	if err := p.Expect(ctx, "HI", 42); err != nil {
		t.Fatal(err)
	}
	p.Send(e, 5)
	if env, err := p.NextEnvelope(ctx); err != nil || env.Message != 10 || env.Sender == nil || !env.Sender.Equal(e) {
		t.Fatalf("envelope %+v %v", env, err)
	}

	p.Send(e, 1)
	err = p.Expect(ctx, 3)
	if err == nil || !strings.Contains(err.Error(), "want int 3") || !strings.Contains(err.Error(), "got  int 2") {
		t.Fatalf("mismatch: %v", err)
	}
	p.Send(e, 2)
	if _, err := choreotest.NextAs[string](ctx, p); err == nil {
		t.Fatal("NextAs[string] took an int")
	}

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.Next(short); !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "choreotest: ") {
		t.Fatalf("next with nothing sent: %v", err)
	}

	if err := p.Watch(ctx, e); err != nil {
		t.Fatal(err)
	}
	sys.Root.Stop(e)
	term, err := choreotest.NextAs[*actor.Terminated](ctx, p)
	if err != nil || !term.Who.Equal(e) {
		t.Fatalf("terminated: %v %v", term, err)
	}
	if p.Pending() != 0 || len(p.Received()) != 6 {
		t.Fatalf("pending %d, received %d", p.Pending(), len(p.Received()))
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestKitTwoRuntimes runs two runtimes, recorders and probes at once:
// nothing of one shows in the other.
func TestKitTwoRuntimes(t *testing.T) {
	var wg sync.WaitGroup
	units := make([][]string, 2)
	for i := range 2 {
		rec := testenv.Recorder(t, testenv.Backend())
		rt := testenv.Runtime(t)
		p, err := choreotest.NewProbe(rt.ActorSystem(), "twin")
		if err != nil {
			t.Fatal(err)
		}
		s, q := testenv.RecordedStream(t, rec, rt, "s")
		wg.Go(func() {
			for range i + 1 {
				x, err := array.Full(s, []int{2}, array.Float32, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if err := x.Wait(testenv.Ctx(t, 10*time.Second)); err != nil {
					t.Error(err)
				}
				p.Send(p.PID(), i)
			}
			units[i] = q.Units()
			if err := p.Expect(testenv.Ctx(t, 10*time.Second), slices.Repeat([]any{i}, i+1)...); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if !slices.Equal(units[0], []string{"fill"}) || !slices.Equal(units[1], []string{"fill", "fill"}) {
		t.Fatalf("units %v", units)
	}
}

// TestKitDiff: equal plans give "", differing ones a report per rank.
func TestKitDiff(t *testing.T) {
	want := choreotest.Same(2, choreotest.Plan{GPU: []string{"copy-d2h+update", "wait", "copy-h2d"}, Tasks: 1})
	got := []choreotest.Plan{
		{GPU: []string{"copy-d2h+update", "wait", "copy-h2d"}, Tasks: 1, Fence: []string{}},
		{GPU: []string{"copy-d2h", "update", "wait"}, Tasks: 2},
	}
	d := choreotest.Diff(want, got)
	for _, s := range []string{
		"rank 1:",
		"gpu:   want [copy-d2h+update wait copy-h2d]",
		"got  [copy-d2h update wait]",
		"tasks: want 1",
	} {
		if !strings.Contains(d, s) {
			t.Errorf("report lacks %q:\n%s", s, d)
		}
	}
	if strings.Contains(d, "rank 0") {
		t.Errorf("rank 0 matched, yet reported:\n%s", d)
	}
	if d := choreotest.Diff(want, want[:1]); !strings.Contains(d, "rank 1: missing") {
		t.Errorf("missing rank: %s", d)
	}
	if d := choreotest.Diff(want[:1], want[:1]); d != "" {
		t.Errorf("equal plans: %s", d)
	}
}

// TestKitHoldAndWatch: Hold keeps what follows pending until it opens, and
// a Watch sees the hold's wait and the held work.
func TestKitHoldAndWatch(t *testing.T) {
	rec := testenv.Recorder(t, testenv.Backend())
	rt := testenv.Runtime(t)
	s, q := testenv.RecordedStream(t, rec, rt, "held")
	ctx := testenv.Ctx(t, 10*time.Second)
	w, err := choreotest.NewWatch(ctx, nil, choreotest.Rank{Stream: s, Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	open, err := choreotest.Hold(s)
	if err != nil {
		t.Fatal(err)
	}
	defer open()
	x, err := array.Full(s, []int{2}, array.Float32, 1)
	if err != nil {
		t.Fatal(err)
	}
	if x.Ready() {
		t.Fatal("the fill ran past the hold")
	}
	open()
	open() // idempotent
	if err := w.Expect(ctx, choreotest.Plan{GPU: []string{"wait", "fill"}}); err != nil {
		t.Fatal(err)
	}
	if !x.Ready() {
		t.Fatal("plans returned before the stream was idle")
	}
}
