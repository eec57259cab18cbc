//go:build linux

package cuda

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/gpu"
)

// queue is a gpu.Queue on one non-blocking CUDA stream.
//
// Submit validates a batch and takes a lease on every buffer and word it
// names. If the queue is idle (nothing being issued or waiting) and the
// batch fits the budget, Submit issues it itself; otherwise it appends it
// to the queue's FIFO. PostUnits (gpu.Poster) always appends, so its
// caller never makes a driver call. Neither blocks on the GPU. The issuer
// goroutine takes batches from the FIFO in order and issues their
// commands to the stream (both through onContext), polling briefly for
// the next batch before it parks, and keeps at most
// Options.MaxInflightBatches batches and Options.MaxInflightCommands
// commands on the GPU; the rest wait in the FIFO. After each batch (and
// within a long batch whenever the command budget runs out) it issues a
// "mark": cuStreamWriteValue32 of the next sequence number into the
// queue's completion word, a host-mapped word only this stream writes.
// The poller (another goroutine) watches that word, spinning briefly
// and then backing off, retires the entries whose mark the GPU passed,
// returns their budget and calls the batches' done callbacks in order. It
// also asks cuStreamQuery now and then, so an asynchronous kernel or
// stream error fails every unfinished batch instead of leaving it pending.
type queue struct {
	dev    *Device
	stream cuStream
	comp   *word // completion word: the GPU writes mark sequence numbers

	maxBatches, maxCmds int

	mu          sync.Mutex
	fifo        []*batch // submitted, not yet taken by the issuer
	inflight    []entry  // taken by the issuer, in order, not yet retired
	nBatches    int      // batches the issuer took and the poller has not retired
	nCmds       int      // commands on the GPU not yet retired
	seq         uint32   // last mark issued
	closing     bool     // Close called: Submit refuses
	aborted     bool     // Close's ctx expired: issue nothing more
	current     *batch   // the batch the issuer is putting on the stream
	broken      error    // sticky stream error seen by the poller
	issuerGone  bool     // the issuer has exited
	forced      bool     // Close gave up on draining: the poller exits
	issuerWake  chan struct{}
	pollerWake  chan struct{}
	pollerNaps  atomic.Bool   // the poller sleeps in its backoff (see kickPollers)
	stopped     chan struct{} // closed when issuer and poller have both exited
	stopOnce    sync.Once
	destroyOnce sync.Once
}

// batch is one submitted batch. A command that fails to issue ends its
// unit: without ends (one unit) err records it and done gets it plain;
// with ends it joins failed and done gets a *gpu.BatchError. err always
// records a failure of the whole batch (the stream broke, the queue was
// aborted), which done gets plain.
type batch struct {
	cmds   []gpu.Command
	ends   []int // unit ends (gpu.ValidateUnits); nil: one unit
	done   func(error)
	held   []resource // leases taken at Submit, dropped when done runs
	waits  []*word    // words named by WaitValue, for Close's release
	writes []*word    // words named by WriteValue, repaired at completion
	err    error      // whole-batch failure, or the one unit's failure
	failed []gpu.UnitError
	closed bool // Close released its waits before it completed
}

// entry is a point in the stream the poller waits for: a mark (marked),
// or, for a batch whose last mark could not be issued, just its turn.
type entry struct {
	b       *batch
	seq     uint32
	marked  bool
	cmds    int  // commands this entry returns to the budget
	last    bool // the batch is complete once this entry retires
	counted bool // the batch holds a slot of the batch budget
}

var (
	_ gpu.Queue  = (*queue)(nil)
	_ gpu.Poster = (*queue)(nil)
)

func (d *Device) newQueue() (*queue, error) {
	comp, err := d.newWord()
	if err != nil {
		return nil, err
	}
	q := &queue{
		dev:        d,
		comp:       comp,
		maxBatches: d.opts.MaxInflightBatches,
		maxCmds:    d.opts.MaxInflightCommands,
		issuerWake: make(chan struct{}, 1),
		pollerWake: make(chan struct{}, 1),
		stopped:    make(chan struct{}),
	}
	a := d.api
	if err := do(d.main, func() error {
		return a.errorf("cuStreamCreate", a.cuStreamCreate(&q.stream, streamNonBlocking))
	}); err != nil {
		comp.Free()
		return nil, fmt.Errorf("cuda: new queue: %w", err)
	}
	issuerDone, pollerDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(issuerDone); q.issueLoop() }()
	go func() { defer close(pollerDone); q.pollLoop() }()
	go func() {
		<-issuerDone
		<-pollerDone
		q.destroy()
		close(q.stopped)
	}()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		q.Close(context.Background())
		return nil, closedf("new queue: device closed")
	}
	d.queues[q] = struct{}{}
	d.refreshKicksLocked()
	d.mu.Unlock()
	return q, nil
}

// destroy gives the stream and the completion word back once both loops
// have exited.
func (q *queue) destroy() {
	q.destroyOnce.Do(func() {
		a := q.dev.api
		do(q.dev.main, func() error { a.cuStreamDestroy(q.stream); return nil })
		q.comp.Free()
		q.dev.mu.Lock()
		delete(q.dev.queues, q)
		q.dev.refreshKicksLocked()
		q.dev.mu.Unlock()
	})
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Submit implements gpu.Queue: SubmitUnits with the batch as one unit.
func (q *queue) Submit(cmds []gpu.Command, done func(error)) error {
	return q.SubmitUnits(cmds, nil, done)
}

// SubmitUnits implements gpu.Queue. A freed buffer or word is not an
// error here: its command fails when it is issued.
func (q *queue) SubmitUnits(cmds []gpu.Command, ends []int, done func(error)) error {
	return q.submit(cmds, ends, done, true)
}

// PostUnits implements gpu.Poster: SubmitUnits that leaves the issuing to
// the issuer goroutine even when the queue is idle, so that its caller
// makes no driver call. A stream that enqueues and goes on posts: on the
// H200 an inline issue cost its caller about 12 us per batch.
func (q *queue) PostUnits(cmds []gpu.Command, ends []int, done func(error)) error {
	return q.submit(cmds, ends, done, false)
}

// submit is SubmitUnits and PostUnits: inline allows the caller to issue
// the batch itself when the queue is idle.
func (q *queue) submit(cmds []gpu.Command, ends []int, done func(error), inline bool) error {
	if err := gpu.ValidateBatch(cmds); err != nil {
		return fmt.Errorf("cuda: submit: %w", err)
	}
	if err := gpu.ValidateUnits(len(cmds), ends); err != nil {
		return fmt.Errorf("cuda: submit: %w", err)
	}
	b := &batch{cmds: slices.Clone(cmds), done: done}
	if len(ends) > 0 {
		b.ends = slices.Clone(ends)
	}
	if b.done == nil {
		b.done = func(error) {}
	}
	var named []resource
	for i, c := range b.cmds {
		rs, err := q.resources(c)
		if err != nil {
			return fmt.Errorf("cuda: submit: command %d: %w", i, err)
		}
		named = append(named, rs...)
		switch c := c.(type) {
		case gpu.WaitValue:
			b.waits = append(b.waits, c.Word.(*word))
		case gpu.WriteValue:
			b.writes = append(b.writes, c.Word.(*word))
		}
	}
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return closedf("submit: queue closed")
	}
	seen := map[resource]bool{}
	for _, r := range named {
		if !seen[r] {
			seen[r] = true
			if r.lease().acquire() {
				b.held = append(b.held, r)
			}
		}
	}
	if !inline || !q.idleFor(len(b.cmds)) {
		q.fifo = append(q.fifo, b)
		q.mu.Unlock()
		wake(q.issuerWake)
		return nil
	}
	// Fast path: nothing is being issued or waiting to be, and the batch
	// fits the budget, so the caller issues it itself (no hand-off to
	// the issuer). q.current keeps the issuer from taking a later batch
	// until this one's last mark is issued.
	q.nBatches++
	q.current = b
	q.mu.Unlock()
	q.issueOnContext(b)
	q.mu.Lock()
	more := len(q.fifo) > 0 || q.closing // the issuer may be waiting to exit
	q.mu.Unlock()
	if more {
		wake(q.issuerWake)
	}
	return nil
}

// idleFor reports, under q.mu, whether a batch of n commands can be issued
// at once by its submitter: no batch is being issued or waiting, and the
// batch and its mark fit the budgets (so issuing it never waits).
func (q *queue) idleFor(n int) bool {
	return q.current == nil && len(q.fifo) == 0 && !q.aborted && q.broken == nil &&
		q.nBatches < q.maxBatches && q.nCmds+n+2 <= q.maxCmds
}

// resources returns the buffers and words c names, checking that they
// belong to this device.
func (q *queue) resources(c gpu.Command) ([]resource, error) {
	var bufs []gpu.Buffer
	var words []gpu.FenceWord
	switch c := c.(type) {
	case gpu.Fill:
		bufs = []gpu.Buffer{c.Dst}
	case gpu.Arange:
		bufs = []gpu.Buffer{c.Dst}
	case gpu.Copy:
		bufs = []gpu.Buffer{c.Dst, c.Src}
	case gpu.Add:
		bufs = []gpu.Buffer{c.Dst, c.A, c.B}
	case gpu.Scale:
		bufs = []gpu.Buffer{c.Dst, c.Src}
	case gpu.PeerReduce:
		t, ok := c.Table.(*peerTable)
		if !ok || t.dev != q.dev {
			return nil, badArgf("%s: table %T is not from this cuda device", c, c.Table)
		}
		bufs = []gpu.Buffer{t.host, t.dtab}
	case gpu.WaitValue:
		words = []gpu.FenceWord{c.Word}
	case gpu.WriteValue:
		words = []gpu.FenceWord{c.Word}
	default:
		return nil, badArgf("unknown command %T", c)
	}
	var rs []resource
	for _, b := range bufs {
		cb, ok := b.(*buffer)
		if !ok || cb.dev != q.dev {
			return nil, badArgf("%s: buffer %T is not from this cuda device", c, b)
		}
		rs = append(rs, cb)
	}
	for _, w := range words {
		cw, ok := w.(*word)
		if !ok || cw.dev != q.dev {
			return nil, badArgf("%s: fence word %T is not from this cuda device", c, w)
		}
		rs = append(rs, cw)
	}
	return rs, nil
}

// finish drops b's leases and calls done, exactly once per batch; it runs
// on the poller (or on Close's path once the poller is gone). A done that
// panics is recovered (callDone).
func (b *batch) finish() {
	err := b.err
	if b.closed {
		err = closedf("batch of %d commands: queue closed before it completed (waits released)", len(b.cmds))
	} else if err == nil && len(b.failed) > 0 {
		err = &gpu.BatchError{Units: b.failed}
	}
	for _, w := range b.writes {
		w.repair()
	}
	for _, r := range b.held {
		r.lease().drop()
	}
	b.held = nil
	callDone(b.done, err)
}

// callDone calls a batch's done callback. A panic in it is the caller's
// bug: it is swallowed (the gpu layer has no logger), so that the poller
// goes on completing the batches after it and Close still finds it.
func callDone(done func(error), err error) {
	defer func() { _ = recover() }()
	done(err)
}

// Close implements gpu.Queue.
func (q *queue) Close(ctx context.Context) error {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	wake(q.issuerWake)
	wake(q.pollerWake)
	select {
	case <-q.stopped:
		return nil
	case <-ctx.Done():
	}
	pending := q.abort()
	drain, cancel := context.WithTimeout(context.Background(), q.dev.opts.DrainTimeout)
	defer cancel()
	select {
	case <-q.stopped:
	case <-drain.Done():
		q.forceFinish()
	}
	if pending == 0 {
		return nil
	}
	return fmt.Errorf("cuda: close queue: %d batches unfinished at the deadline, their waits released: %w", pending, ctx.Err())
}

// abort stops issuing, releases every word named by a WaitValue that has
// not completed (stores gpu.StopValue) so that the stream drains, and
// marks every unfinished batch to complete with gpu.ErrClosed. Batches
// still in the FIFO never reach the GPU; they join the in-flight list
// without marks, so done still runs in submission order. It returns the
// number of unfinished batches.
func (q *queue) abort() int {
	q.mu.Lock()
	var release []*word
	pending := 0
	if !q.aborted {
		q.aborted = true
		for _, e := range q.inflight {
			if e.last {
				e.b.closed = true
				pending++
			}
			release = append(release, e.b.waits...)
		}
		if b := q.current; b != nil {
			b.closed = true
			pending++
			release = append(release, b.waits...)
		}
		for _, b := range q.fifo {
			pending++
			b.closed = true
			release = append(release, b.waits...)
			q.inflight = append(q.inflight, entry{b: b, last: true})
		}
		q.fifo = nil
	}
	q.mu.Unlock()
	for _, w := range release {
		w.Store(gpu.StopValue)
	}
	wake(q.issuerWake)
	wake(q.pollerWake)
	return pending
}

// forceFinish completes every batch left after the drain bound passed
// (the stream did not drain in time) and tells the poller to stop.
func (q *queue) forceFinish() {
	q.mu.Lock()
	left := q.inflight
	q.inflight = nil
	q.broken = closedf("queue closed: stream did not drain within %v", q.dev.opts.DrainTimeout)
	q.forced = true // the poller exits at its next look
	q.mu.Unlock()
	for _, e := range left {
		if e.last {
			e.b.closed = true
			e.b.finish()
		}
	}
	wake(q.pollerWake)
}
