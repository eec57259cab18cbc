package streams_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// postingDevice is the test backend's device whose queues count how the
// stream hands them batches. Its queues are gpu.Posters: PostUnits goes to
// the backend queue's own PostUnits where it has one (CUDA), else to its
// SubmitUnits, so every batch still runs on the real backend.
type postingDevice struct {
	gpu.Device
	posted, submitted *countedCalls
}

// countedCalls counts calls of one kind made on a device's queues.
type countedCalls struct {
	mu sync.Mutex
	n  int
}

func (c *countedCalls) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }

func (c *countedCalls) get() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

func (d postingDevice) NewQueue() (gpu.Queue, error) {
	q, err := d.Device.NewQueue()
	if err != nil {
		return nil, err
	}
	return &postingQueue{Queue: q, d: d}, nil
}

// postingQueue is one of a postingDevice's queues.
type postingQueue struct {
	gpu.Queue
	d postingDevice
}

func (q *postingQueue) Submit(cmds []gpu.Command, done func(error)) error {
	q.d.submitted.add()
	return q.Queue.Submit(cmds, done)
}

func (q *postingQueue) SubmitUnits(cmds []gpu.Command, ends []int, done func(error)) error {
	q.d.submitted.add()
	return q.Queue.SubmitUnits(cmds, ends, done)
}

func (q *postingQueue) PostUnits(cmds []gpu.Command, ends []int, done func(error)) error {
	q.d.posted.add()
	if p, ok := q.Queue.(gpu.Poster); ok {
		return p.PostUnits(cmds, ends, done)
	}
	return q.Queue.SubmitUnits(cmds, ends, done)
}

// TestGPUStreamPostsToAPoster: on a queue that is a gpu.Poster, the stream
// posts every batch, lone Enqueues and gathered bursts alike, and never
// submits; the commands run in order, each Enqueue as a unit of its own
// (a failed one fails alone), and every done is called once.
func TestGPUStreamPostsToAPoster(t *testing.T) {
	dev := postingDevice{Device: testenv.Device(t), posted: &countedCalls{}, submitted: &countedCalls{}}
	rt := testenv.Runtime(t)
	s, err := streams.NewGPU(rt, dev)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Ctx(t, 30*time.Second)
	x, err := array.Full(s, []int{4}, array.Int32, 0)
	if err != nil {
		t.Fatal(err)
	}
	const calls = 200 // a burst: more than the stream keeps in flight, so some are gathered
	var dones countedCalls
	for i := range calls {
		cmd := gpu.Fill{Dst: x.Buffer(), DType: gpu.Int32, N: 4, Value: gpu.Int(int64(i + 1))}
		if _, err := s.Enqueue([]gpu.Command{cmd}, func(err error) {
			if err != nil {
				t.Errorf("enqueue %d: %v", i, err)
			}
			dones.add()
		}); err != nil {
			t.Fatal(err)
		}
	}
	x.SetEvent(s.Last())
	got, err := array.ToSlice[int32](ctx, x)
	if err != nil || !slices.Equal(got, []int32{calls, calls, calls, calls}) {
		t.Fatalf("values %v %v: want the last fill's", got, err)
	}
	if n := dones.get(); n != calls {
		t.Fatalf("%d done callbacks, want %d", n, calls)
	}
	// A unit that fails (a freed buffer) fails alone, through the post path.
	gone, err := dev.Alloc(16, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	_ = gone.Free()
	errs := make(chan error, 2)
	if _, err := s.Enqueue([]gpu.Command{gpu.Fill{Dst: gone, DType: gpu.Int32, N: 4, Value: gpu.Int(1)}},
		func(err error) { errs <- err }); err != nil {
		errs <- err // refused at once (sim checks at the call): a failure of its own too
	}
	if _, err := s.Enqueue([]gpu.Command{gpu.Fill{Dst: x.Buffer(), DType: gpu.Int32, N: 4, Value: gpu.Int(7)}},
		func(err error) { errs <- err }); err != nil {
		t.Fatal(err)
	}
	if first, second := testenv.Recv(t, errs, 30*time.Second), testenv.Recv(t, errs, 30*time.Second); first == nil || second != nil {
		t.Fatalf("outcomes %v, %v: want the fill of a freed buffer alone to fail", first, second)
	}
	if err := s.Last().Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if p, sub := dev.posted.get(), dev.submitted.get(); p == 0 || sub != 0 {
		t.Fatalf("%d batches posted, %d submitted: want every batch posted", p, sub)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
