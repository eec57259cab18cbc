package streams_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// TestGPUOrderPerSender: commands from many concurrent senders complete
// in the order each sender sent them, and an Event implies every earlier one.
func TestGPUOrderPerSender(t *testing.T) {
	dev := testenv.Device(t)
	rt := testenv.Runtime(t)
	s := testenv.Stream(t, rt, dev)
	const senders, each = 8, 300
	w, _ := dev.NewFenceWord()
	var mu sync.Mutex
	lastSeen := make([]int, senders)
	var bad atomic.Int32
	var wg sync.WaitGroup
	events := make([][]streams.Event, senders)
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf, _ := dev.Alloc(4, gpu.HostMem)
			for k := 1; k <= each; k++ {
				cmds := []gpu.Command{gpu.Fill{Dst: buf, DType: gpu.Int32, N: 1, Value: gpu.Int(int64(k))}}
				if k%50 == 0 { // waits in the mix split batches
					cmds = append(cmds, gpu.WaitValue{Word: w, Value: 0})
				}
				ev, err := s.Enqueue(cmds, func(err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil || lastSeen[i] != k-1 {
						bad.Add(1)
					}
					lastSeen[i] = k
				})
				if err != nil {
					t.Error(err)
					return
				}
				events[i] = append(events[i], ev)
			}
		}()
	}
	wg.Wait()
	for i := range senders {
		if err := events[i][each-1].Wait(testenv.Ctx(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		for k, ev := range events[i] {
			if !ev.Done() {
				t.Fatalf("sender %d: event %d not done after a later one", i, k)
			}
		}
	}
	if bad.Load() != 0 {
		t.Fatalf("%d completions out of order or failed", bad.Load())
	}
}

// TestCommOneAtATime: tasks run one at a time, in submission order.
func TestCommOneAtATime(t *testing.T) {
	rt := testenv.Runtime(t)
	c, err := streams.NewComm(rt, "test")
	if err != nil {
		t.Fatal(err)
	}
	var running, maxRunning atomic.Int32
	var order []int
	var mu sync.Mutex
	done := make(chan struct{})
	const n = 200
	for i := range n {
		err := c.Submit(streams.Task{Name: "t", Run: func(context.Context) error {
			if r := running.Add(1); r > maxRunning.Load() {
				maxRunning.Store(r)
			}
			defer running.Add(-1)
			if i%20 == 0 {
				time.Sleep(time.Millisecond)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			return nil
		}, Done: func(err error) {
			if err != nil {
				t.Error(err)
			}
			if i == n-1 {
				close(done)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("tasks did not finish")
	}
	if maxRunning.Load() != 1 {
		t.Fatalf("%d tasks ran at once", maxRunning.Load())
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("task %d ran at position %d", v, i)
		}
	}
}

// TestPanicBecomesError: a panicking task fails with ErrPanic and the
// stream runs the next task.
func TestPanicBecomesError(t *testing.T) {
	rt := testenv.Runtime(t)
	c := testenv.DefaultComm(t, rt)
	errs := make(chan error, 3)
	submit := func(run func(context.Context) error) {
		if err := c.Submit(streams.Task{Name: "p", Run: run, Done: func(err error) { errs <- err }}); err != nil {
			t.Fatal(err)
		}
	}
	submit(func(context.Context) error { panic("boom") })
	submit(func(context.Context) error { return errors.New("plain failure") })
	submit(func(context.Context) error { return nil })
	want := []func(error) bool{
		func(err error) bool { return errors.Is(err, streams.ErrPanic) },
		func(err error) bool { return err != nil && !errors.Is(err, streams.ErrPanic) },
		func(err error) bool { return err == nil },
	}
	for i, ok := range want {
		select {
		case err := <-errs:
			if !ok(err) {
				t.Fatalf("task %d: unexpected result %v", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("task %d never finished: the stream died", i)
		}
	}
}

func TestBadInputAndClosed(t *testing.T) {
	dev := testenv.Device(t)
	rt := testenv.Runtime(t)
	if _, err := streams.NewGPU(nil, dev); err == nil {
		t.Fatal("nil runtime accepted")
	}
	if _, err := streams.NewGPU(rt, nil); !errors.Is(err, gpu.ErrBadArgument) {
		t.Fatalf("nil device: %v", err)
	}
	s, _ := streams.NewGPU(rt, dev)
	if _, err := s.Enqueue([]gpu.Command{gpu.Fill{}}, nil); !errors.Is(err, gpu.ErrBadArgument) {
		t.Fatalf("bad command: %v", err)
	}
	if err := testenv.DefaultComm(t, rt).Submit(streams.Task{Name: "nil"}); err == nil {
		t.Fatal("nil Run accepted")
	}
	if err := s.Close(testenv.Ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	buf, _ := dev.Alloc(4, gpu.HostMem)
	if _, err := s.Enqueue([]gpu.Command{gpu.Fill{Dst: buf, DType: gpu.Int8, N: 1}}, nil); !errors.Is(err, streams.ErrClosed) {
		t.Fatalf("enqueue on closed stream: %v", err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := streams.NewGPU(rt, dev); err == nil {
		t.Fatal("new stream on a closed runtime accepted")
	}
}
