package sim_test

import (
	"sync"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// inlineStorer is the sim word's StoreInline, as the fence package sees it.
type inlineStorer interface{ StoreInline(v uint32) }

// TestStoreInlineRunsSuspendedBatch: a batch waiting on a word holds no
// goroutine; StoreInline of that word runs the rest of it (a small copy)
// and its done on the storing goroutine, before StoreInline returns, and
// the batch queued behind it runs after it, done after done.
func TestStoreInlineRunsSuspendedBatch(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	w := must[gpu.FenceWord](t)(dev.NewFenceWord())
	after := must[gpu.FenceWord](t)(dev.NewFenceWord())
	src := must[gpu.Buffer](t)(dev.Alloc(64, gpu.DeviceMem))
	dst := must[gpu.Buffer](t)(dev.Alloc(64, gpu.DeviceMem))
	src.Bytes()[0] = 7
	var mu sync.Mutex
	var order []int
	done := make(chan error, 2)
	note := func(i int) func(error) {
		return func(err error) {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			done <- err
		}
	}
	if err := q.Submit([]gpu.Command{
		gpu.WaitValue{Word: w, Value: 1},
		gpu.Copy{Dst: dst, Src: src, Bytes: 64},
	}, note(1)); err != nil {
		t.Fatal(err)
	}
	if err := q.Submit([]gpu.Command{gpu.WriteValue{Word: after, Value: 1}}, note(2)); err != nil {
		t.Fatal(err)
	}
	w.(inlineStorer).StoreInline(1)
	mu.Lock()
	first := append([]int(nil), order...)
	mu.Unlock()
	if len(first) == 0 || first[0] != 1 {
		t.Fatalf("dones called by the time StoreInline returned: %v, want the waiting batch's first", first)
	}
	if dst.Bytes()[0] != 7 {
		t.Error("the copy after the wait did not run before StoreInline returned")
	}
	for range 2 {
		if err := waitDone(t, done); err != nil {
			t.Fatal(err)
		}
	}
	if after.Load() != 1 || order[1] != 2 {
		t.Errorf("the batch behind: word %d, dones in order %v", after.Load(), order)
	}
}

// TestStoreLeavesBatchToWorker: a plain Store (which any goroutine may
// make, holding any lock) only hands the suspended batch to the queue's
// worker, which completes it; and a large copy after the wait goes to the
// worker even under StoreInline.
func TestStoreLeavesBatchToWorker(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	w := must[gpu.FenceWord](t)(dev.NewFenceWord())
	big := 1 << 20
	src := must[gpu.Buffer](t)(dev.Alloc(big, gpu.DeviceMem))
	dst := must[gpu.Buffer](t)(dev.Alloc(big, gpu.DeviceMem))
	src.Bytes()[big-1] = 9
	done := make(chan error, 2)
	if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: w, Value: 1}}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: w, Value: 2}, gpu.Copy{Dst: dst, Src: src, Bytes: big}},
		func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	w.Store(1)
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
	w.(inlineStorer).StoreInline(2)
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if dst.Bytes()[big-1] != 9 {
		t.Error("large copy after the wait did not run")
	}
}

// TestIdleSubmitRunsInline: on an idle queue, a batch that writes a fence
// word has written it by the time Submit returns; its done still comes.
func TestIdleSubmitRunsInline(t *testing.T) {
	dev := newDev(t)
	q := must[gpu.Queue](t)(dev.NewQueue())
	w := must[gpu.FenceWord](t)(dev.NewFenceWord())
	done := make(chan error, 1)
	if err := q.Submit([]gpu.Command{gpu.WriteValue{Word: w, Value: 5}}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if v := w.Load(); v != 5 {
		t.Errorf("word %d right after Submit on an idle queue, want 5", v)
	}
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
}
