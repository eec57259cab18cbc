package sim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// TestFreedWord: a queue wait and a CPU wait on a word freed under them
// fail with ErrClosed; Submit refuses a freed word.
func TestFreedWord(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	w := must[gpu.FenceWord](t)(dev.NewFenceWord())
	done := make(chan error, 1)
	if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: w, Value: 1}}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	cpu := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cpu <- w.Wait(ctx, 1, nil)
	}()
	time.Sleep(20 * time.Millisecond)
	w.Free()
	if err := waitDone(t, done); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("queue wait on a freed word: %v", err)
	}
	if err := waitDone(t, cpu); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("CPU wait on a freed word: %v", err)
	}
	if err := q.Submit([]gpu.Command{gpu.WriteValue{Word: w, Value: 1}}, nil); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("Submit naming a freed word: %v", err)
	}
}

// TestPingPong: many fence round trips through two queues, with the
// queues' and the CPU's waits racing the writes; a lost wake-up shows as
// a timeout.
func TestPingPong(t *testing.T) {
	dev := newDev(t)
	q1 := must[gpu.Queue](t)(dev.NewQueue())
	q2 := must[gpu.Queue](t)(dev.NewQueue())
	a := must[gpu.FenceWord](t)(dev.NewFenceWord())
	b := must[gpu.FenceWord](t)(dev.NewFenceWord())
	c := must[gpu.FenceWord](t)(dev.NewFenceWord())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := uint32(1); i <= 3000; i++ {
		if err := q2.Submit([]gpu.Command{gpu.WaitValue{Word: b, Value: i}, gpu.WriteValue{Word: c, Value: i}}, nil); err != nil {
			t.Fatal(err)
		}
		if err := q1.Submit([]gpu.Command{gpu.WaitValue{Word: a, Value: i}, gpu.WriteValue{Word: b, Value: i}}, nil); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			time.Sleep(time.Microsecond * time.Duration(i%50)) // let the queues park
		}
		a.Store(i)
		if err := c.Wait(ctx, i, nil); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
}
