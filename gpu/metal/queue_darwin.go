//go:build darwin

package metal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/progrium/darwinkit/macos/metal"
	"github.com/progrium/darwinkit/objc"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/metalshader"
)

// cbWait is the completion of one committed command buffer: err is set
// (a command-buffer error) before ch is closed by the completed handler.
type cbWait struct {
	ch  chan struct{}
	err error
}

// batch is one submitted batch on its way through the queue: the worker
// encodes it (err, failed, parts, retained), the completer finishes it.
// slot and aborted are guarded by queue.mu; cmds, ends and words are fixed
// at Submit. A command that fails to encode ends its unit: without ends
// (one unit) err records it and done gets it plain; with ends it joins
// failed and done gets a *gpu.BatchError. err always records a failure of
// the whole batch (the queue stopped), which done gets plain.
type batch struct {
	cmds     []gpu.Command
	ends     []int // unit ends (gpu.ValidateUnits); nil: one unit
	done     func(error)
	words    []fenceWord // named by its WaitValues, released by abort
	slot     int         // status slot, -1 if none
	aborted  bool        // live when the queue aborted
	err      error       // whole-batch failure, or the one unit's failure
	failed   []gpu.UnitError
	parts    []*cbWait // its committed command buffers, in order
	retained []objc.Object
}

// queue is a gpu.Queue on one MTLCommandQueue (+1). Submit appends to a
// FIFO; a worker goroutine encodes each batch inside an autorelease pool
// into command buffers and commits them; a completer goroutine waits for
// each batch's command buffers in order, turns its status word into its
// error and calls done. Each batch in flight owns a slot of the status
// buffer (statusSlots uint32 words, shared, hazard-tracked so that
// Metal orders the queue's command buffers one after another); every
// kernel of the batch does nothing once its slot is nonzero: a fast-mode
// wait gave up, or Close stopped it. Close follows gpu.Queue's contract.
type queue struct {
	dev      *Device
	mq       metal.CommandQueueObject
	status   metal.BufferObject
	slots    []uint32 // the status buffer's contents; atomics only
	freeSlot chan int

	mu      sync.Mutex
	pending []*batch
	live    map[*batch]struct{} // submitted, not yet finished
	closing bool
	wake    chan struct{} // capacity 1

	inflight    chan *batch   // worker -> completer
	stopCh      chan struct{} // closed by abort
	stopped     atomic.Bool
	abortOnce   sync.Once
	killCh      chan struct{} // closed when Close stops waiting for the GPU
	killOnce    sync.Once
	finished    chan struct{} // closed when the completer has finished every batch
	releaseOnce sync.Once

	// Worker only.
	dirty map[*buffer]dirtyBuf // written since the last fast-mode WriteValue
	last  *cbWait              // the queue's most recently committed command buffer
}

// dirtyBuf is a buffer the queue wrote (retained while it is dirty) and its
// size in 32-bit words.
type dirtyBuf struct {
	obj   metal.BufferObject
	words int
}

var _ gpu.Queue = (*queue)(nil)

// statusOptions: shared storage with hazard tracking (see queue).
const statusOptions = metal.ResourceStorageModeShared

func newQueue(d *Device) (*queue, error) {
	mq := d.dev.NewCommandQueue() // +1
	if mq.IsNil() {
		return nil, fmt.Errorf("metal: new queue: newCommandQueue returned nil: %w", gpu.ErrOutOfMemory)
	}
	status := d.dev.NewBufferWithLengthOptions(4*statusSlots, statusOptions) // +1
	if status.IsNil() {
		mq.Release()
		return nil, fmt.Errorf("metal: new queue: status buffer: %w", gpu.ErrOutOfMemory)
	}
	q := &queue{
		dev:      d,
		mq:       mq,
		status:   status,
		slots:    unsafe.Slice((*uint32)(status.Contents()), statusSlots),
		freeSlot: make(chan int, statusSlots),
		live:     map[*batch]struct{}{},
		wake:     make(chan struct{}, 1),
		inflight: make(chan *batch, 2*statusSlots),
		stopCh:   make(chan struct{}),
		killCh:   make(chan struct{}),
		finished: make(chan struct{}),
		dirty:    map[*buffer]dirtyBuf{},
	}
	for i := range statusSlots {
		atomic.StoreUint32(&q.slots[i], metalshader.StatusRunning)
		q.freeSlot <- i
	}
	go q.work()
	go q.complete()
	return q, nil
}

// Submit implements gpu.Queue: SubmitUnits with the batch as one unit.
func (q *queue) Submit(cmds []gpu.Command, done func(error)) error {
	return q.SubmitUnits(cmds, nil, done)
}

// SubmitUnits implements gpu.Queue: validate, check that every buffer and
// word is this device's (and, for a batch of one unit, live: with units a
// freed object fails its unit when it is encoded), enqueue. It never waits
// for the GPU.
func (q *queue) SubmitUnits(cmds []gpu.Command, ends []int, done func(error)) error {
	if err := gpu.ValidateBatch(cmds); err != nil {
		return fmt.Errorf("metal: submit: %w", err)
	}
	if err := gpu.ValidateUnits(len(cmds), ends); err != nil {
		return fmt.Errorf("metal: submit: %w", err)
	}
	words, err := q.checkOwned(cmds, len(ends) > 0)
	if err != nil {
		return err
	}
	b := &batch{cmds: append([]gpu.Command(nil), cmds...), done: done, words: words, slot: -1}
	if len(ends) > 0 {
		b.ends = append([]int(nil), ends...)
	}
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return errClosedf("submit: queue")
	}
	q.pending = append(q.pending, b)
	q.live[b] = struct{}{}
	q.mu.Unlock()
	q.poke()
	return nil
}

// poke wakes the worker if it is parked.
func (q *queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next pops the next batch; nil once the queue is closing and empty. The
// worker parks on wake between batches (Submit and Close poke it).
func (q *queue) next() *batch {
	for {
		q.mu.Lock()
		if len(q.pending) > 0 {
			b := q.pending[0]
			q.pending[0] = nil
			q.pending = q.pending[1:]
			q.mu.Unlock()
			return b
		}
		if q.closing {
			q.mu.Unlock()
			return nil
		}
		q.mu.Unlock()
		<-q.wake
	}
}

// work is the worker goroutine: encode and commit each batch in order.
func (q *queue) work() {
	defer close(q.inflight)
	for b := q.next(); b != nil; b = q.next() {
		q.run(b)
		q.inflight <- b
	}
}

// run takes a status slot for b and encodes it, or fails it with ErrClosed
// once the queue stopped.
func (q *queue) run(b *batch) {
	if q.stopped.Load() {
		b.err = errClosedf("queue closed before the batch ran")
		return
	}
	select {
	case s := <-q.freeSlot:
		q.mu.Lock()
		b.slot = s
		v := metalshader.StatusRunning
		if b.aborted {
			v = metalshader.StatusStopped
		}
		atomic.StoreUint32(&q.slots[s], v)
		q.mu.Unlock()
	case <-q.stopCh:
		b.err = errClosedf("queue closed before the batch ran")
		return
	}
	objc.WithAutoreleasePool(func() { b.err = q.encode(b) })
}

// complete is the completer goroutine: finish each batch in order and call
// its done.
func (q *queue) complete() {
	defer close(q.finished)
	for b := range q.inflight {
		err := q.finish(b)
		if b.done != nil {
			callDone(b.done, err)
		}
	}
}

// callDone calls a batch's done callback. A panic in it is the caller's
// bug: it is swallowed (the gpu layer has no logger), so that the
// completer goes on with the batches after it and Close still finds it.
func callDone(done func(error), err error) {
	defer func() { _ = recover() }()
	done(err)
}

// finish waits for b's command buffers (until Close gives up on the GPU),
// releases what b retained, frees its slot and returns its error.
func (q *queue) finish(b *batch) error {
	for _, p := range b.parts {
		select {
		case <-p.ch:
		case <-q.killCh:
			// The GPU may still use b's objects: leak them, keep the slot.
			q.forget(b)
			return errClosedf("queue closed while the GPU still ran the batch")
		}
	}
	for _, o := range b.retained {
		o.Release()
	}
	b.retained = nil
	err := b.err
	for _, p := range b.parts {
		if err == nil {
			err = p.err
		}
	}
	if b.slot >= 0 {
		if err == nil {
			var at int
			at, err = q.statusErr(b, atomic.LoadUint32(&q.slots[b.slot]))
			if err != nil && at >= 0 && b.ends != nil {
				b.failed = gaveUp(b, at, err)
				err = nil
			}
		}
		q.freeSlot <- b.slot
	}
	if q.forget(b) && !errors.Is(err, gpu.ErrClosed) {
		if err == nil {
			return errClosedf("queue closed before the batch finished")
		}
		return errClosedf("queue closed before the batch finished (%v)", err)
	}
	if err == nil && len(b.failed) > 0 {
		return &gpu.BatchError{Units: b.failed}
	}
	return err
}

// gaveUp returns b's failed units once the wait at command at gave up
// (err): that command's unit fails with err, and every later unit did not
// run either (the batch's status stops all its kernels), so each fails
// with ErrWaitTimeout too unless encoding had already failed it.
func gaveUp(b *batch, at int, err error) []gpu.UnitError {
	var failed []gpu.UnitError
	next := 0 // index in b.failed
	start := 0
	for u, end := range b.ends {
		var own *gpu.UnitError
		for next < len(b.failed) && b.failed[next].Unit <= u {
			if b.failed[next].Unit == u {
				own = &b.failed[next]
			}
			next++
		}
		switch {
		case end <= at:
			if own != nil {
				failed = append(failed, *own)
			}
		case start <= at:
			failed = append(failed, gpu.UnitError{Unit: u, Command: at, Err: err})
		case own != nil:
			failed = append(failed, *own)
		default:
			failed = append(failed, gpu.UnitError{Unit: u, Command: start,
				Err: fmt.Errorf("metal: not run: the wait of command %d gave up earlier in the batch: %w", at, ErrWaitTimeout)})
		}
		start = end
	}
	return failed
}

// forget removes b from the live set and reports whether abort saw it.
func (q *queue) forget(b *batch) (aborted bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.live, b)
	return b.aborted
}

// statusErr turns a batch's final status word into its error and, for a
// wait that gave up, that wait's command index (-1 otherwise).
func (q *queue) statusErr(b *batch, s uint32) (int, error) {
	code, i := metalshader.ParseStatus(s)
	switch code {
	case metalshader.StatusRunning:
		return -1, nil
	case metalshader.StatusStopped:
		return -1, errClosedf("batch stopped by queue close")
	case metalshader.StatusWaitTimeout:
		if i < len(b.cmds) {
			return i, fmt.Errorf("metal: command %d %v: gave up after %d polls: %w", i, b.cmds[i], q.dev.cfg.waitPolls, ErrWaitTimeout)
		}
	}
	return -1, fmt.Errorf("metal: batch ended with unknown status %#x", s)
}

// Close implements gpu.Queue.
func (q *queue) Close(ctx context.Context) error {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	q.poke()
	select {
	case <-q.finished:
		q.release()
		return nil
	default:
	}
	select {
	case <-q.finished:
		q.release()
		return nil
	case <-ctx.Done():
	}
	batches, words := q.abort()
	t := time.NewTimer(q.dev.cfg.drainBound)
	defer t.Stop()
	select {
	case <-q.finished:
	case <-t.C:
		q.killOnce.Do(func() { close(q.killCh) })
		return fmt.Errorf("metal: close queue: GPU still busy %v after releasing %d fence words (its Metal objects are leaked): %w",
			q.dev.cfg.drainBound, words, ctx.Err())
	}
	q.release()
	return fmt.Errorf("metal: close queue: abandoned %d unfinished batches, released %d fence words: %w",
		batches, words, ctx.Err())
}

// abort stops the queue: the worker encodes nothing more, every live
// batch's status slot says stopped (its kernels do nothing, a fast-mode
// wait returns), and every word a live batch waits on gets StopValue,
// which also releases MTLSharedEvent waits. It reports how many batches
// were unfinished and how many words it released.
func (q *queue) abort() (batches, words int) {
	q.abortOnce.Do(func() {
		var ws []fenceWord
		q.mu.Lock()
		q.stopped.Store(true)
		for b := range q.live {
			b.aborted = true
			batches++
			if b.slot >= 0 {
				atomic.CompareAndSwapUint32(&q.slots[b.slot], metalshader.StatusRunning, metalshader.StatusStopped)
			}
			ws = append(ws, b.words...)
		}
		q.mu.Unlock()
		close(q.stopCh)
		for _, w := range ws {
			w.Store(gpu.StopValue)
		}
		words = len(ws)
	})
	return batches, words
}

// release frees the queue's Metal objects once the GPU is done with them
// (never after Close gave up on the GPU: then they are leaked).
func (q *queue) release() {
	q.releaseOnce.Do(func() {
		select {
		case <-q.killCh:
			return
		default:
		}
		for b, d := range q.dirty {
			d.obj.Release()
			delete(q.dirty, b)
		}
		q.status.Release()
		q.mq.Release()
		q.dev.forgetQueue(q)
	})
}
