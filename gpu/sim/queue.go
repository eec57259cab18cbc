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
	err  error // its outcome, once it ran (in queue.dones)
}

// queue is a sim gpu.Queue: an unbounded FIFO of batches (mutex + slice +
// wake-up token) drained by one worker goroutine that runs the batches in
// submission order and calls each done exactly once (a done that panics is
// recovered; the queue goes on). Ready work runs where it is, one
// goroutine at a time (see run): a Submit that finds the queue idle runs
// its batch on the submitter when it waits for or writes a fence word and
// moves little (inlineable), leaving its done to the worker; a batch that
// reaches a WaitValue not yet satisfied suspends instead of holding a
// goroutine, and a write of that word through StoreInline runs the rest
// of the batch, and its done, on the writer's goroutine (any other write
// hands it to the worker).
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
	busy      bool            // a goroutine runs a batch's commands
	calling   bool            // a goroutine calls dones: only it, in order (see finish)
	dones     []batch         // batches that ran, whose done is still to be called, in order
	susp      *run            // the run suspended on suspOn >= suspV; nil when none
	suspOn    *word
	suspV     uint32
	ready     *run          // a suspended run whose wait is over, for the worker
	cur       batch         // the batch running or suspended; zero when none
	seq       atomic.Uint64 // bumped by every accepted Submit, polled by an idle worker

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
	b := batch{cmds: own, ends: ownEnds, done: done}
	if !q.busy && q.susp == nil && q.ready == nil && q.head == len(q.pending) &&
		hasFenceOp(cmds) && inlineable(cmds) {
		q.busy, q.cur = true, b
		q.waitAt.Store(0)
		q.mu.Unlock()
		q.drive(&run{b: b}, onSubmit)
		return nil
	}
	q.pending = append(q.pending, b)
	q.seq.Add(1)
	wake := q.idle && !q.busy && q.susp == nil
	if wake {
		q.idle = false
	}
	q.mu.Unlock()
	if wake {
		q.wakeCh <- struct{}{} // never blocks: the token was consumed before idle was set
	}
	return nil
}

// work is the worker goroutine: call the dones left to it, take a resumed
// run or the next batch and run it, repeat; park when it has nothing to do
// (after a short poll): the FIFO is empty, or held behind a suspended run
// or one going on elsewhere; return once closing and nothing is left.
func (q *queue) work() {
	defer close(q.exited)
	for {
		q.mu.Lock()
		var r *run
		for r == nil {
			if len(q.dones) > 0 && !q.calling {
				q.calling = true
				q.callDones() // unlocks
				q.mu.Lock()
				continue
			}
			if q.ready != nil {
				r, q.ready, q.busy = q.ready, nil, true
				break
			}
			free := q.susp == nil && !q.busy
			if free && q.head < len(q.pending) {
				r = &run{b: q.pop()}
				q.cur, q.busy = r.b, true
				q.waitAt.Store(0)
				break
			}
			if free && q.closing && len(q.dones) == 0 && !q.calling {
				q.mu.Unlock()
				return
			}
			q.idle = true
			seq := q.seq.Load()
			q.mu.Unlock()
			// Poll briefly, then park. Whoever gives us work (Submit,
			// Close, a resumed run, dones to call) clears idle and sends
			// exactly one token, so the receive below returns soon after
			// the poll saw new work, or parks until then.
			waitSpin.Until(func() bool { return q.seq.Load() != seq })
			<-q.wakeCh
			q.mu.Lock()
		}
		q.mu.Unlock()
		q.drive(r, onWorker)
	}
}

// pop takes the FIFO's next batch (q.mu held).
func (q *queue) pop() batch {
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
	return b
}

// callDones calls the dones of q.dones in order, on the calling goroutine,
// which holds the calling token (q.mu held on entry, released on return);
// then it gives the token back and hands the worker what is left for it.
// Batches end in submission order (one runs at a time), so their dones
// run in that order whichever goroutines call them.
func (q *queue) callDones() {
	for len(q.dones) > 0 {
		b := q.dones[0]
		q.dones[0] = batch{}
		q.dones = q.dones[1:]
		q.mu.Unlock()
		refBuffers(b.cmds, -1)
		if b.done != nil {
			callDone(b.done, b.err)
		}
		q.mu.Lock()
		clear(b.cmds)
		if len(q.spare) < maxSpare && cap(b.cmds) <= maxSpareCap {
			q.spare = append(q.spare, b.cmds[:0])
		}
		if b.ends != nil && len(q.spareEnds) < maxSpare && cap(b.ends) <= maxSpareCap {
			q.spareEnds = append(q.spareEnds, b.ends[:0])
		}
	}
	q.dones = nil
	q.calling = false
	q.wakeWorkerLocked()
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
	q.wakeWorkerLocked()
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
			w.raise(gpu.StopValue, false)
		}
		words = len(ws)
	})
	return batches, words
}
