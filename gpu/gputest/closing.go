package gputest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// testCloseIdle: closing an idle queue returns nil at once; Submit then
// fails with ErrClosed; a second Close returns.
func testCloseIdle(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	r.mustRun(q)
	if err := q.Close(r.ctx()); err != nil {
		t.Fatalf("Close of an idle queue: %v", err)
	}
	err := q.Submit(nil, func(error) { t.Error("done called for a batch refused after Close") })
	expectErr(t, "Submit after Close", err, gpu.ErrClosed)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := q.Close(ctx); err != nil && !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

// testCloseDrains: Close waits for submitted work that can finish, and every
// done has been called (with nil) by the time it returns.
func testCloseDrains(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	const n = 1 << 16
	buf := r.alloc(4*n, gpu.DeviceMem)
	a := r.word()
	var cs []*completion
	for i := range 20 {
		cs = append(cs, r.submit(q,
			gpu.Arange{Dst: buf, DType: gpu.Float32, N: n, Start: gpu.Int(int64(i)), Step: gpu.Float(0.5)},
			gpu.Scale{Dst: buf, Src: buf, DType: gpu.Float32, N: n, Factor: gpu.Float(2)},
		))
	}
	// A wait that the CPU satisfies while Close is waiting.
	cs = append(cs, r.submit(q, gpu.WaitValue{Word: a, Value: 1}))
	time.AfterFunc(settle, func() { a.Store(1) })
	if err := q.Close(r.ctx()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, c := range cs {
		if !c.called() {
			t.Fatalf("batch %d not completed when Close returned", i)
		}
		if err := r.wait(c); err != nil {
			t.Errorf("batch %d: %v", i, err)
		}
	}
}

// testCloseWithBlockedWork: a batch blocked on a wait that never comes.
// Close with a 200ms deadline returns an error wrapping DeadlineExceeded
// within a bound, both batches complete with ErrClosed, and the blocking
// word was released with StopValue.
func testCloseWithBlockedWork(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	never, b := r.word(), r.word()
	buf := r.alloc(64, gpu.DeviceMem)
	blocked := r.submit(q, gpu.WaitValue{Word: never, Value: 1}, gpu.WriteValue{Word: b, Value: 1})
	behind := r.submit(q, gpu.Fill{Dst: buf, DType: gpu.Int32, N: 16, Value: gpu.Int(1)})

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	got := make(chan error, 1)
	go func() { got <- q.Close(ctx) }()
	var err error
	select {
	case err = <-got:
	case <-time.After(Timeout):
		t.Fatalf("Close(200ms) still blocked after %v", Timeout)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close(200ms) took %v", d)
	}
	expectErr(t, "Close with blocked work", err, context.DeadlineExceeded)
	expectErr(t, "blocked batch", r.wait(blocked), gpu.ErrClosed)
	expectErr(t, "batch behind it", r.wait(behind), gpu.ErrClosed)
	if v := never.Load(); v != gpu.StopValue {
		t.Errorf("blocking word = %#x after Close, want StopValue", v)
	}
	err = q.Submit([]gpu.Command{gpu.WriteValue{Word: b, Value: 2}}, func(error) {})
	expectErr(t, "Submit after Close", err, gpu.ErrClosed)
}

// testDeviceClose: after Device.Close every constructor fails with
// ErrClosed.
func testDeviceClose(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	buf := r.alloc(64, gpu.DeviceMem)
	r.mustRun(q, gpu.Fill{Dst: buf, DType: gpu.Uint8, N: 64, Value: gpu.Int(1)})
	if err := r.dev.Close(); err != nil {
		t.Fatalf("Device.Close: %v", err)
	}
	_, err := r.dev.Alloc(16, gpu.HostMem)
	expectErr(t, "Alloc after Device.Close", err, gpu.ErrClosed)
	_, err = r.dev.NewQueue()
	expectErr(t, "NewQueue after Device.Close", err, gpu.ErrClosed)
	_, err = r.dev.NewFenceWord()
	expectErr(t, "NewFenceWord after Device.Close", err, gpu.ErrClosed)
	err = q.Submit(nil, func(error) {})
	expectErr(t, "Submit after Device.Close", err, gpu.ErrClosed)
}
