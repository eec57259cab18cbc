package collectives_test

import (
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// Regression tests for defects a review found; each failed before its fix.

// A collective queued behind others on its comm stream gets its whole
// timeout once it runs: its fence's deadline does not count the queue.
func TestQueuedCollectivesKeepTheirTimeout(t *testing.T) {
	w := newWorld(t, 2, collectives.WithTimeout(2*time.Second))
	var ys, zs []*array.Array
	for range 4 { // rank 0 queues four at once
		x, _ := array.Full(w.s[0], []int{8}, array.Float32, 1)
		y, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum)
		if err != nil {
			t.Fatal(err)
		}
		ys = append(ys, y)
	}
	for range 4 { // rank 1 joins them one by one, each well within the timeout
		time.Sleep(1200 * time.Millisecond)
		x, _ := array.Full(w.s[1], []int{8}, array.Float32, 1)
		z, err := w.groups[1].AllReduce(w.s[1], x, collectives.Sum)
		if err != nil {
			t.Fatal(err)
		}
		zs = append(zs, z)
	}
	for i := range ys {
		for r, a := range []*array.Array{ys[i], zs[i]} {
			v, err := array.ToSlice[float32](testenv.Ctx(t, 5*time.Second), a)
			if err != nil || v[0] != 2 {
				t.Fatalf("op %d rank %d: %v %v", i, r, v, err)
			}
		}
	}
}

// An input whose producer fails after the collective was launched fails
// the collective's output on this rank, and the peers fail by its
// abort, not at their deadline.
func TestInputFailingAfterLaunch(t *testing.T) {
	w := newWorld(t, 2, collectives.WithTimeout(30*time.Second))
	r, err := w.groups[0].Recv(w.s[0], []int{4}, gpu.Float32, 1)
	if err != nil {
		t.Fatal(err)
	}
	y, err := w.groups[0].AllReduce(w.s[0], r, collectives.Sum) // r fails later
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := array.Full(w.s[1], []int{5}, array.Float32, 9) // wrong shape: the Recv fails
	if err := w.groups[1].Send(w.s[1], bad, 0); err != nil {
		t.Fatal(err)
	}
	x1, _ := array.Full(w.s[1], []int{4}, array.Float32, 1)
	z, err := w.groups[1].AllReduce(w.s[1], x1, collectives.Sum)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := array.ToSlice[float32](testenv.Ctx(t, 60*time.Second), y); err == nil {
		t.Fatalf("all-reduce over a failed input returned %v without error", v)
	}
	_, err = array.ToSlice[float32](testenv.Ctx(t, 60*time.Second), z)
	var ae *transport.AbortError
	if !errors.As(err, &ae) || ae.Origin != 0 || !errors.Is(ae.Cause, array.ErrFailed) || errors.Is(err, collectives.ErrTimeout) {
		t.Fatalf("peer: %v, want rank 0's abort for its failed input (not its own deadline)", err)
	}
}

// A Send that fails on this rank still takes its place in the pair's
// order: the next Send meets the next Recv, not the failed one's.
func TestFailedSendKeepsPairOrder(t *testing.T) {
	w := newWorld(t, 2, collectives.WithTimeout(5*time.Second))
	xa, _ := array.Full(w.s[0], []int{4}, array.Float32, 111)
	xa.Fail(errors.New("producer failed"))
	xb, _ := array.Full(w.s[0], []int{4}, array.Float32, 222)
	if err := w.groups[0].Send(w.s[0], xa, 1); err == nil {
		t.Fatal("send of a failed array accepted")
	}
	if err := w.groups[0].Send(w.s[0], xb, 1); err != nil {
		t.Fatal(err)
	}
	r1, _ := w.groups[1].Recv(w.s[1], []int{4}, gpu.Float32, 0)
	r2, _ := w.groups[1].Recv(w.s[1], []int{4}, gpu.Float32, 0)
	if v, err := array.ToSlice[float32](testenv.Ctx(t, 10*time.Second), r1); !errors.Is(err, collectives.ErrAborted) {
		t.Fatalf("recv #1: %v %v, want ErrAborted", v, err)
	}
	if v, err := array.ToSlice[float32](testenv.Ctx(t, 10*time.Second), r2); err != nil || v[0] != 222 {
		t.Fatalf("recv #2: %v %v, want send #2's data", v, err)
	}
}

// Donating an input does not let the collective overwrite it before the
// commands queued earlier on the same stream have read it.
func TestDonationWaitsForQueuedReaders(t *testing.T) {
	w := newWorld(t, 2, collectives.WithTimeout(5*time.Second))
	hold, err := collectives.Local(w.rt, 2, collectives.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	x0, _ := array.Full(w.s[0], []int{4}, array.Float32, 1)
	x1, _ := array.Full(w.s[1], []int{4}, array.Float32, 1)
	if err := x0.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := hold[0].Recv(w.s[0], []int{1}, gpu.Float32, 1); err != nil { // holds stream 0
		t.Fatal(err)
	}
	scaled, _ := array.Scale(w.s[0], x0, 3) // queued before the all-reduce
	y0, err := w.groups[0].AllReduce(w.s[0], x0, collectives.Sum, collectives.Donate())
	if err != nil {
		t.Fatal(err)
	}
	y1, _ := w.groups[1].AllReduce(w.s[1], x1, collectives.Sum)
	time.Sleep(100 * time.Millisecond)
	other := testenv.Stream(t, w.rt, w.dev) // stream 1 waits for rank 0 now
	one, _ := array.Full(other, []int{1}, array.Float32, 1)
	if err := hold[1].Send(other, one, 0); err != nil { // releases stream 0
		t.Fatal(err)
	}
	if v, err := array.ToSlice[float32](testenv.Ctx(t, 10*time.Second), scaled); err != nil || v[0] != 3 {
		t.Fatalf("reader queued before the donation saw %v %v, want 3", v, err)
	}
	for r, y := range []*array.Array{y0, y1} {
		if v, err := array.ToSlice[float32](testenv.Ctx(t, 10*time.Second), y); err != nil || v[0] != 2 {
			t.Fatalf("rank %d: %v %v", r, v, err)
		}
	}
}
