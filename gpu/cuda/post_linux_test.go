//go:build linux

package cuda

import (
	"slices"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/gputest"
)

// withContext lets f's driver table make a queue's context current (the
// fake context is 0, which cuCtxGetCurrent reports as current already).
func withContext(q *queue) {
	q.dev.api.cuCtxGetCurrent = func(c *cuContext) cuResult { *c = q.dev.ctx; return cudaSuccess }
}

// TestSubmitIssuesInlineWhenIdle is the twin of TestPostNeverIssuesInline:
// on an idle queue Submit issues the batch on its caller, so the driver has
// seen the copy and its completion mark when Submit returns (which shows
// that the probe below sees an inline issue).
func TestSubmitIssuesInlineWhenIdle(t *testing.T) {
	f := &fakeDriver{}
	q, bufs := fakeQueue(f, 2)
	withContext(q)
	if err := q.Submit([]gpu.Command{cp(bufs[0], bufs[1])}, nil); err != nil {
		t.Fatal(err)
	}
	if len(f.copies) != 1 || len(f.writes) != 1 || len(q.fifo) != 0 {
		t.Fatalf("after Submit on an idle queue: %d copies, %d marks issued, %d batches queued; want 1, 1, 0",
			len(f.copies), len(f.writes), len(q.fifo))
	}
}

// TestPostNeverIssuesInline: PostUnits on an idle queue makes no driver
// call on its caller: the batch waits in the FIFO for the issuer, and a
// batch submitted after it queues behind it (the queue is no longer idle);
// the issuer then issues both, in submission order.
func TestPostNeverIssuesInline(t *testing.T) {
	f := &fakeDriver{}
	q, bufs := fakeQueue(f, 3)
	withContext(q)
	if err := q.PostUnits([]gpu.Command{cp(bufs[0], bufs[2])}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(f.copies) != 0 || len(f.writes) != 0 || len(q.fifo) != 1 {
		t.Fatalf("after PostUnits: %d copies, %d marks issued, %d batches queued; want 0, 0, 1",
			len(f.copies), len(f.writes), len(q.fifo))
	}
	if len(q.issuerWake) != 1 {
		t.Fatal("PostUnits did not wake the issuer")
	}
	if err := q.Submit([]gpu.Command{cp(bufs[1], bufs[2])}, nil); err != nil {
		t.Fatal(err)
	}
	if len(f.copies) != 0 || len(q.fifo) != 2 {
		t.Fatalf("a Submit behind a posted batch: %d copies issued, %d batches queued; want 0, 2", len(f.copies), len(q.fifo))
	}
	for range 2 { // the issuer's loop, one batch at a time
		b := q.nextBatch()
		if b == nil {
			t.Fatal("the issuer found no batch")
		}
		q.issueOnContext(b)
	}
	if want := []uintptr{bufs[0].dptr, bufs[1].dptr}; !slices.Equal(f.copies, want) {
		t.Fatalf("copies issued to %#x, want %#x (submission order)", f.copies, want)
	}
	if len(f.writes) != 2 {
		t.Fatalf("%d completion marks, want one per batch", len(f.writes))
	}
}

// postingQueue is a queue whose Submit and SubmitUnits post, so that the
// conformance suite runs every batch through PostUnits.
type postingQueue struct{ *queue }

func (q postingQueue) Submit(cmds []gpu.Command, done func(error)) error {
	return q.PostUnits(cmds, nil, done)
}

func (q postingQueue) SubmitUnits(cmds []gpu.Command, ends []int, done func(error)) error {
	return q.PostUnits(cmds, ends, done)
}

// postingDevice is a Device whose queues are postingQueues.
type postingDevice struct{ *Device }

func (d postingDevice) NewQueue() (gpu.Queue, error) {
	q, err := d.Device.NewQueue()
	if err != nil {
		return nil, err
	}
	return postingQueue{q.(*queue)}, nil
}

// TestConformancePosted runs the backend conformance suite with every
// batch posted (the issuer issues them all), in memop mode.
func TestConformancePosted(t *testing.T) {
	openDev(t, Options{}) // skip where there is no GPU
	gputest.Run(t, func(t *testing.T) gpu.Device { return postingDevice{openDev(t, Options{})} })
}
