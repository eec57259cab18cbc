package sim

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// drainBound caps how long Close waits for the worker to drain after it
// released the queue's waits. Only a kernel still running or a done
// callback that blocks (a caller bug) can make the drain take this long.
const drainBound = 10 * time.Second

// Limits of the queue's bookkeeping: how many consumed FIFO slots may pile
// up before the FIFO is compacted, and how many (and how large) command
// slices are kept for reuse.
const (
	compactAt   = 1024
	maxSpare    = 64
	maxSpareCap = 4096
)

// batch is one submitted batch: a private copy of the commands, of the
// unit ends (nil: one unit, whose failure done gets as a plain error) and
// the completion callback (nil allowed).
type batch struct {
	cmds []gpu.Command
	ends []int
	done func(error)
}

// queue is a sim gpu.Queue: an unbounded FIFO of batches (mutex + slice +
// wake-up token) drained by one worker goroutine that runs the batches in
// submission order and calls each done exactly once, from the worker (a
// done that panics is recovered; the worker goes on).
// Submit copies the batch into a recycled slice, so the caller may reuse
// its slice at once and steady-state submission does not allocate.
// Close follows gpu.Queue's contract; see abort for the release path.
type queue struct {
	dev *Device

	mu        sync.Mutex
	pending   []batch // FIFO: pending[head:] waits to run
	head      int
	spare     [][]gpu.Command // recycled command slices
	spareEnds [][]int         // recycled unit-end slices
	closing   bool            // Submit refuses; worker exits once pending is empty
	idle      bool            // worker parked (or about to) on wakeCh
	cur       batch           // the batch the worker runs; zero when none
	seq       atomic.Uint64   // bumped by every accepted Submit, polled by an idle worker

	waitAt atomic.Int64 // index in cur.cmds of the first WaitValue not yet passed

	wakeCh    chan struct{} // capacity 1; one token per idle -> busy transition
	aborted   atomic.Bool
	abortCh   chan struct{} // closed by abort
	abortOnce sync.Once
	exited    chan struct{} // closed when the worker returns
}

var _ gpu.Queue = (*queue)(nil)

func newQueue(d *Device) *queue {
	q := &queue{
		dev:     d,
		wakeCh:  make(chan struct{}, 1),
		abortCh: make(chan struct{}),
		exited:  make(chan struct{}),
	}
	go q.work()
	return q
}

// Submit implements gpu.Queue: SubmitUnits with the batch as one unit.
func (q *queue) Submit(cmds []gpu.Command, done func(error)) error {
	return q.SubmitUnits(cmds, nil, done)
}

// SubmitUnits implements gpu.Queue. It validates the batch
// (gpu.ValidateBatch, gpu.ValidateUnits, then that every buffer and word
// belongs to this device and, for a batch of one unit, is not freed) and
// enqueues it; it never waits for the worker.
func (q *queue) SubmitUnits(cmds []gpu.Command, ends []int, done func(error)) error {
	if err := gpu.ValidateBatch(cmds); err != nil {
		return fmt.Errorf("sim: submit: %w", err)
	}
	if err := gpu.ValidateUnits(len(cmds), ends); err != nil {
		return fmt.Errorf("sim: submit: %w", err)
	}
	if err := q.checkOwned(cmds, len(ends) > 0); err != nil {
		return err
	}
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return errClosedf("submit: queue")
	}
	refBuffers(cmds, +1) // the blocks stay out of the cache until the batch ends
	var own []gpu.Command
	if n := len(q.spare); n > 0 {
		own = q.spare[n-1]
		q.spare[n-1] = nil
		q.spare = q.spare[:n-1]
	}
	own = append(own[:0], cmds...)
	var ownEnds []int
	if len(ends) > 0 {
		if n := len(q.spareEnds); n > 0 {
			ownEnds = q.spareEnds[n-1]
			q.spareEnds[n-1] = nil
			q.spareEnds = q.spareEnds[:n-1]
		}
		ownEnds = append(ownEnds[:0], ends...)
	}
	q.pending = append(q.pending, batch{cmds: own, ends: ownEnds, done: done})
	q.seq.Add(1)
	wake := q.idle
	q.idle = false
	q.mu.Unlock()
	if wake {
		q.wakeCh <- struct{}{} // never blocks: the token was consumed before idle was set
	}
	return nil
}

// work is the worker goroutine: pop a batch, run it, call done, repeat;
// park when the FIFO is empty (after a short poll); return once closing and
// empty.
func (q *queue) work() {
	defer close(q.exited)
	var prev batch
	for {
		q.mu.Lock()
		q.cur = batch{}
		if prev.cmds != nil {
			clear(prev.cmds)
			if len(q.spare) < maxSpare && cap(prev.cmds) <= maxSpareCap {
				q.spare = append(q.spare, prev.cmds[:0])
			}
		}
		if prev.ends != nil && len(q.spareEnds) < maxSpare && cap(prev.ends) <= maxSpareCap {
			q.spareEnds = append(q.spareEnds, prev.ends[:0])
		}
		prev = batch{}
		for q.head == len(q.pending) {
			if q.closing {
				q.mu.Unlock()
				return
			}
			q.idle = true
			seq := q.seq.Load()
			q.mu.Unlock()
			// Poll briefly, then park. Whoever turns us busy (Submit, Close)
			// clears idle and sends exactly one token, so the receive below
			// returns soon after the poll saw new work, or parks until then.
			waitSpin.Until(func() bool { return q.seq.Load() != seq })
			<-q.wakeCh
			q.mu.Lock()
		}
		b := q.pending[q.head]
		q.pending[q.head] = batch{}
		q.head++
		switch {
		case q.head == len(q.pending):
			q.pending = q.pending[:0]
			q.head = 0
		case q.head >= compactAt && 2*q.head >= len(q.pending):
			// A submitter that never lets the FIFO run dry would otherwise
			// grow it forever; moving the live half down is amortised O(1).
			n := copy(q.pending, q.pending[q.head:])
			clear(q.pending[n:])
			q.pending = q.pending[:n]
			q.head = 0
		}
		q.cur = b
		q.waitAt.Store(0)
		q.mu.Unlock()

		err := q.exec(b)
		refBuffers(b.cmds, -1)
		if b.done != nil {
			callDone(b.done, err)
		}
		prev = batch{cmds: b.cmds, ends: b.ends}
	}
}

// callDone calls a batch's done callback. A panic in it is the caller's
// bug: it is swallowed (the gpu layer has no logger), so that the worker
// goes on with the batches after it and Close still finds it.
func callDone(done func(error), err error) {
	defer func() { _ = recover() }()
	done(err)
}

// Close implements gpu.Queue: stop accepting, wait for the submitted
// batches up to ctx, and if ctx expires first, abort: release every word a
// pending WaitValue names (StopValue), complete the unfinished batches with
// ErrClosed, and return an error wrapping ctx.Err() (nil if no batch was
// left unfinished). Close may be called more than once; later calls wait
// like the first. A done callback must not Close its own queue or device:
// the worker that runs it is what Close waits for.
func (q *queue) Close(ctx context.Context) error {
	q.mu.Lock()
	q.closing = true
	wake := q.idle
	q.idle = false
	q.mu.Unlock()
	if wake {
		q.wakeCh <- struct{}{}
	}
	select {
	case <-q.exited:
		q.dev.forgetQueue(q)
		return nil
	default:
	}
	select {
	case <-q.exited:
		q.dev.forgetQueue(q)
		return nil
	case <-ctx.Done():
	}
	batches, words := q.abort()
	t := time.NewTimer(drainBound)
	defer t.Stop()
	select {
	case <-q.exited:
	case <-t.C:
		return fmt.Errorf("sim: close queue: still draining %v after releasing %d fence words: %w",
			drainBound, words, ctx.Err())
	}
	q.dev.forgetQueue(q)
	if batches == 0 {
		// The deadline passed with nothing left to run (the worker was
		// only on its way out): nothing was abandoned.
		return nil
	}
	return fmt.Errorf("sim: close queue: abandoned %d unfinished batches, released %d fence words: %w",
		batches, words, ctx.Err())
}

// abort marks the queue aborted, so the worker fails every command it has
// not started with ErrClosed, stores StopValue into every word named by a
// WaitValue not yet passed (in the running batch from waitAt on, and in
// every pending batch) and wakes the worker if it waits. It returns how
// many batches were unfinished and how many words it released.
func (q *queue) abort() (batches, words int) {
	q.abortOnce.Do(func() {
		var ws []*word
		collect := func(cmds []gpu.Command) {
			for _, c := range cmds {
				if wv, ok := c.(gpu.WaitValue); ok {
					ws = append(ws, wv.Word.(*word))
				}
			}
		}
		q.mu.Lock()
		q.aborted.Store(true)
		if q.cur.cmds != nil {
			batches++
			if at := int(q.waitAt.Load()); at < len(q.cur.cmds) {
				collect(q.cur.cmds[at:])
			}
		}
		for _, b := range q.pending[q.head:] {
			batches++
			collect(b.cmds)
		}
		q.mu.Unlock()
		close(q.abortCh)
		for _, w := range ws {
			w.raise(gpu.StopValue)
		}
		words = len(ws)
	})
	return batches, words
}
