package gputest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// testWaitHoldsBack: a WaitValue holds back the rest of its batch and every
// later batch on the queue until the CPU stores the value.
func testWaitHoldsBack(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	a, b, c := r.word(), r.word(), r.word()
	buf := r.alloc(16, gpu.DeviceMem)
	host := r.alloc(16, gpu.HostMem)
	first := r.submit(q,
		gpu.WaitValue{Word: a, Value: 1},
		gpu.Fill{Dst: buf, DType: gpu.Int32, N: 4, Value: gpu.Int(42)},
		gpu.Copy{Dst: host, Src: buf, Bytes: 16},
		gpu.WriteValue{Word: b, Value: 1},
	)
	second := r.submit(q, gpu.WriteValue{Word: c, Value: 1})
	time.Sleep(settle)
	if first.called() || second.called() || b.Load() != 0 || c.Load() != 0 {
		t.Fatalf("work behind an unmet wait ran: done %v/%v, words %d/%d",
			first.called(), second.called(), b.Load(), c.Load())
	}
	a.Store(1)
	r.waitWord(b, 1)
	for i, v := range int32s(host.Bytes()) {
		if v != 42 {
			t.Fatalf("element %d = %d after the update, want 42", i, v)
		}
	}
	if err := r.wait(first); err != nil {
		t.Fatal(err)
	}
	if err := r.wait(second); err != nil {
		t.Fatal(err)
	}
	if c.Load() != 1 {
		t.Errorf("later batch's write: word %d, want 1", c.Load())
	}
}

// testWriteAfterKernel: once the CPU sees a WriteValue that follows a
// kernel and a copy to host memory, the copy's data is visible. The
// test reads the host buffer right after the fence wait, without waiting
// for the batch's done, many times over.
func testWriteAfterKernel(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	const n = 1024
	w := r.word()
	dev := r.alloc(4*n, gpu.DeviceMem)
	host := r.alloc(4*n, gpu.HostMem)
	var last *completion
	for i := range 200 {
		last = r.submit(q,
			gpu.Arange{Dst: dev, DType: gpu.Int32, N: n, Start: gpu.Int(int64(i)), Step: gpu.Int(1)},
			gpu.Copy{Dst: host, Src: dev, Bytes: 4 * n},
			gpu.WriteValue{Word: w, Value: uint32(i + 1)},
		)
		r.waitWord(w, uint32(i+1))
		for j, v := range int32s(host.Bytes()) {
			if v != int32(i+j) {
				t.Fatalf("round %d: element %d = %d right after the fence, want %d", i, j, v, i+j)
			}
		}
	}
	if err := r.wait(last); err != nil {
		t.Fatal(err)
	}
}

// testWaitAlreadyReached: a wait for a value the word already reached
// passes without any further write; so does one on a word the same queue
// wrote just before.
func testWaitAlreadyReached(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	a, b := r.word(), r.word()
	a.Store(5)
	r.mustRun(q, gpu.WaitValue{Word: a, Value: 3}, gpu.WaitValue{Word: a, Value: 5}, gpu.WriteValue{Word: b, Value: 1})
	r.mustRun(q, gpu.WriteValue{Word: b, Value: 2}, gpu.WaitValue{Word: b, Value: 2}, gpu.WaitValue{Word: b, Value: 0})
	if b.Load() != 2 {
		t.Errorf("word %d, want 2", b.Load())
	}
}

// testCrossQueue: a WriteValue on one queue releases a WaitValue on
// another, and the waiting queue then sees the writer's data.
func testCrossQueue(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q1, q2 := r.queue(), r.queue()
	a, b := r.word(), r.word()
	buf := r.alloc(4*64, gpu.DeviceMem)
	host := r.alloc(4*64, gpu.HostMem)
	waiter := r.submit(q1,
		gpu.WaitValue{Word: a, Value: 1},
		gpu.Copy{Dst: host, Src: buf, Bytes: 4 * 64},
		gpu.WriteValue{Word: b, Value: 1},
	)
	time.Sleep(settle)
	if waiter.called() {
		t.Fatal("waiting batch completed before the other queue wrote")
	}
	r.mustRun(q2,
		gpu.Fill{Dst: buf, DType: gpu.Int32, N: 64, Value: gpu.Int(-7)},
		gpu.WriteValue{Word: a, Value: 1},
	)
	r.waitWord(b, 1)
	for i, v := range int32s(host.Bytes()) {
		if v != -7 {
			t.Fatalf("element %d = %d, want -7", i, v)
		}
	}
	if err := r.wait(waiter); err != nil {
		t.Fatal(err)
	}
}

// testStopValue: storing StopValue releases a queued wait for 1000 and
// every later wait, whatever its value.
func testStopValue(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	a, b := r.word(), r.word()
	c1 := r.submit(q, gpu.WaitValue{Word: a, Value: 1000}, gpu.WriteValue{Word: b, Value: 1})
	c2 := r.submit(q,
		gpu.WaitValue{Word: a, Value: 5000},
		gpu.WaitValue{Word: a, Value: gpu.StopValue - 1},
		gpu.WaitValue{Word: a, Value: gpu.StopValue},
		gpu.WriteValue{Word: b, Value: 2},
	)
	time.Sleep(settle)
	if c1.called() || b.Load() != 0 {
		t.Fatal("wait for 1000 passed before the release")
	}
	a.Store(gpu.StopValue)
	for _, c := range []*completion{c1, c2} {
		if err := r.wait(c); err != nil {
			t.Fatal(err)
		}
	}
	r.mustRun(q, gpu.WaitValue{Word: a, Value: 1 << 30}, gpu.WriteValue{Word: b, Value: 3})
	if b.Load() != 3 {
		t.Errorf("word b = %d, want 3", b.Load())
	}
	ctx := r.ctx()
	if err := a.Wait(ctx, 1000, nil); err != nil {
		t.Errorf("CPU wait after the release: %v", err)
	}
}

// testMonotonic: no write lowers a word: GPU 9 then 5, CPU 9 then 5,
// and a GPU write after the CPU's StopValue.
func testMonotonic(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	g, c, s := r.word(), r.word(), r.word()
	r.mustRun(q, gpu.WriteValue{Word: g, Value: 9}, gpu.WriteValue{Word: g, Value: 5})
	if v := g.Load(); v != 9 {
		t.Errorf("GPU writes 9, 5: word %d, want 9", v)
	}
	r.mustRun(q, gpu.WriteValue{Word: g, Value: 11})
	if v := g.Load(); v != 11 {
		t.Errorf("GPU write 11 after 9: word %d", v)
	}
	c.Store(9)
	c.Store(5)
	if v := c.Load(); v != 9 {
		t.Errorf("CPU stores 9, 5: word %d, want 9", v)
	}
	gate := r.word()
	late := r.submit(q, gpu.WaitValue{Word: gate, Value: 1}, gpu.WriteValue{Word: s, Value: 1})
	s.Store(gpu.StopValue)
	gate.Store(1)
	if err := r.wait(late); err != nil {
		t.Fatal(err)
	}
	if v := s.Load(); v != gpu.StopValue {
		t.Errorf("GPU write 1 after StopValue: word %#x, want %#x", v, gpu.StopValue)
	}
}

// testFenceWait: the CPU-side wait returns at once when the word is
// reached (even with ctx and cancel already done), wakes on a Store that
// reaches the value and not before, and honours ctx's deadline and cancel.
func testFenceWait(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	w := r.word()
	w.Store(4)
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	closed := make(chan struct{})
	close(closed)
	if err := w.Wait(dead, 4, closed); err != nil {
		t.Errorf("wait for a reached value with ctx and cancel done: %v", err)
	}

	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		got <- w.Wait(ctx, 7, nil)
	}()
	w.Store(5)
	w.Store(6)
	select {
	case err := <-got:
		t.Fatalf("wait for 7 returned at word %d: %v", w.Load(), err)
	case <-time.After(settle):
	}
	w.Store(7)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("wait for 7: %v", err)
		}
	case <-time.After(Timeout):
		t.Fatal("wait for 7 not woken by Store(7)")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := boundedWait(t, w, ctx, 100, nil)
	expectErr(t, "wait past its deadline", err, context.DeadlineExceeded)
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("wait with a 50ms deadline returned after %v", d)
	}

	stop := make(chan struct{})
	time.AfterFunc(20*time.Millisecond, func() { close(stop) })
	err = boundedWait(t, w, context.Background(), 100, stop)
	expectErr(t, "canceled wait", err, gpu.ErrCanceled)

	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel2)
	err = boundedWait(t, w, ctx2, 100, nil)
	expectErr(t, "wait with canceled ctx", err, context.Canceled)
}

// boundedWait runs w.Wait on another goroutine and fails the test if it has
// not returned within Timeout (a wait that ignores ctx or cancel).
func boundedWait(t *testing.T, w gpu.FenceWord, ctx context.Context, v uint32, cancel <-chan struct{}) error {
	t.Helper()
	got := make(chan error, 1)
	go func() { got <- w.Wait(ctx, v, cancel) }()
	select {
	case err := <-got:
		return err
	case <-time.After(Timeout):
		t.Fatalf("fence wait for %d ignored its ctx/cancel for %v", v, Timeout)
		return errors.New("unreachable")
	}
}

// testReset: Reset brings a word back to 0, after which waits hold again
// on the CPU and on a queue.
func testReset(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	a, b := r.word(), r.word()
	a.Store(7)
	a.Reset()
	if v := a.Load(); v != 0 {
		t.Fatalf("after Reset: word %d, want 0", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	expectErr(t, "wait on a reset word", boundedWait(t, a, ctx, 1, nil), context.DeadlineExceeded)

	c := r.submit(q, gpu.WaitValue{Word: a, Value: 1}, gpu.WriteValue{Word: b, Value: 1})
	time.Sleep(settle)
	if c.called() {
		t.Fatal("queue wait passed on a reset word")
	}
	a.Store(1)
	if err := r.wait(c); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	r.mustRun(q, gpu.WriteValue{Word: b, Value: 3})
	if v := b.Load(); v != 3 {
		t.Errorf("write after Reset: word %d, want 3", v)
	}
}
