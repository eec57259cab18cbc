//go:build linux

package cuda

import (
	"errors"
	"fmt"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// issueLoop is the issuer's body: it puts batches on the stream in
// submission order until the queue is closed and empty, or aborted.
func (q *queue) issueLoop() {
	for {
		b := q.nextBatch()
		if b == nil {
			q.mu.Lock()
			q.issuerGone = true
			q.mu.Unlock()
			wake(q.pollerWake)
			return
		}
		q.issueOnContext(b)
	}
}

// issueOnContext issues b with the device's context current on the
// calling goroutine's thread (see onContext). If the context cannot be
// made current, b completes, in its turn, with that error.
func (q *queue) issueOnContext(b *batch) {
	err := onContext(q.dev.api, q.dev.ctx, func() error {
		q.issueBatch(b)
		return nil
	})
	if err != nil {
		b.err = fmt.Errorf("cuda: issue: %w", err)
		q.mark(b, 0, true)
	}
}

// nextBatch waits for a batch and a slot of the batch budget; nil means
// exit. The wait ends when the poller retires a batch, Submit or
// PostUnits adds one, or Close is called; it polls for idleSpin (where
// spin.Budget allows) before it parks.
func (q *queue) nextBatch() *batch {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		// The issuer outlives a batch its submitter is issuing (current),
		// so that the poller, which exits after the issuer, sees its marks.
		if q.aborted && q.current == nil || q.closing && len(q.fifo) == 0 && q.current == nil {
			return nil
		}
		if len(q.fifo) > 0 && q.current == nil && q.nBatches < q.maxBatches {
			b := q.fifo[0]
			q.fifo[0] = nil
			q.fifo = q.fifo[1:]
			q.nBatches++
			q.current = b
			return b
		}
		empty := len(q.fifo) == 0
		q.mu.Unlock()
		// Posted batches come in runs (a collective's input and output
		// sides), microseconds apart: with nothing queued, poll for the
		// next before parking, where processors are to spare, so it needs
		// no wake-up. A batch held back by the budget waits for the GPU
		// instead, much longer: no polling for that.
		if empty {
			spin.Until(min(idleSpin, spin.Budget()), func() bool { return len(q.issuerWake) > 0 })
		}
		<-q.issuerWake
		q.mu.Lock()
	}
}

// issueBatch issues b's commands unit by unit, marking progress whenever
// the command budget runs out, and ends with b's last mark. A command that
// fails to issue ends its unit (the batch, without ends); the commands
// before it still run, and so do the later units. A failure that is not
// the command's own (the queue aborted, the context broken: see
// issueFailure) ends the whole batch.
func (q *queue) issueBatch(b *batch) {
	unmarked := 0
	n := len(b.cmds)
units:
	for u, start := 0, 0; start < n; u++ {
		end := n
		if b.ends != nil {
			end = b.ends[u]
		}
		for i := start; i < end; i++ {
			if err := q.reserve(b, &unmarked); err != nil {
				if b.err == nil {
					b.err = err
				}
				break units
			}
			k, err := q.issue(b.cmds[i])
			if err != nil {
				err = fmt.Errorf("cuda: command %d (%s): %w", i, b.cmds[i], err)
				if b.ends == nil || q.issueFailure(err) {
					b.err = err
					break units
				}
				b.failed = append(b.failed, gpu.UnitError{Unit: u, Command: i, Err: err})
				break
			}
			unmarked += k
		}
		start = end
	}
	q.mark(b, unmarked, true)
}

// issueFailure reports whether err, a command's failure to issue, breaks
// the whole batch rather than the command's unit: a driver error while
// the stream has failed (a sticky, asynchronous context error that every
// later call would meet too). Our own checks (a freed buffer) and driver
// errors of the call alone fail only the unit. It runs with the context
// current.
func (q *queue) issueFailure(err error) bool {
	var de *Error
	if !errors.As(err, &de) {
		return false
	}
	r := q.dev.api.cuStreamQuery(q.stream)
	return r != cudaSuccess && r != cudaNotReady
}

// reserve waits until one more command and a mark fit the command budget.
// With unmarked commands pending it first marks them, so the poller can
// return their budget once the GPU passes them.
func (q *queue) reserve(b *batch, unmarked *int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.aborted {
			return closedf("queue closed while its batch was being issued")
		}
		if q.broken != nil {
			return q.broken
		}
		if q.nCmds+*unmarked+2 <= q.maxCmds {
			return nil
		}
		q.mu.Unlock()
		if *unmarked > 0 {
			q.mark(b, *unmarked, false)
			*unmarked = 0
		} else {
			<-q.issuerWake
		}
		q.mu.Lock()
	}
}

// mark ends a run of n issued commands of b with a completion mark (the
// next sequence number written to the completion word by the stream) and
// hands it to the poller. The last mark of a batch is issued even for
// n == 0 when earlier marks exist; with nothing to mark, the entry simply
// retires in its turn.
func (q *queue) mark(b *batch, n int, last bool) {
	if n == 0 && !last {
		return
	}
	e := entry{b: b, cmds: n, last: last, counted: last}
	if n > 0 {
		a := q.dev.api
		seq := q.seq + 1
		r := a.cuStreamWriteValue32(q.stream, q.comp.s.dptr, seq, streamWriteValueDefault)
		if err := a.errorf("cuStreamWriteValue32_v2", r); err != nil {
			if b.err == nil {
				b.err = fmt.Errorf("cuda: completion mark: %w", err)
			}
		} else {
			q.seq = seq
			e.seq, e.marked = seq, true
			e.cmds++
		}
	}
	q.mu.Lock()
	if last {
		q.current = nil
	}
	q.inflight = append(q.inflight, e)
	q.nCmds += e.cmds
	q.mu.Unlock()
	wake(q.pollerWake)
}

// issue puts one command on the stream and returns how many stream
// operations it took (0 for an empty op).
func (q *queue) issue(c gpu.Command) (int, error) { return issueOn(q.dev, q.stream, c) }

// issueOn puts one command on stream s of d (its context current) and
// returns how many stream operations it took.
func issueOn(d *Device, s cuStream, c gpu.Command) (int, error) {
	a, k := d.api, d.kern
	switch c := c.(type) {
	case gpu.WaitValue:
		w := c.Word.(*word)
		if w.l.isFreed() {
			return 0, closedf("wait: fence word freed")
		}
		return 1, a.errorf("cuStreamWaitValue32_v2", a.cuStreamWaitValue32(s, w.s.dptr, c.Value, streamWaitValueGEQ))
	case gpu.WriteValue:
		w := c.Word.(*word)
		if w.l.isFreed() {
			return 0, closedf("write: fence word freed")
		}
		if d.opts.MonotonicKernel {
			return 1, k.storeMaxWord(a, s, w.s.dptr, c.Value)
		}
		// A stream write is a plain store. Writing the largest value
		// issued for the word so far, or already in it, keeps a
		// single-writer word monotonic.
		v := max(c.Value, w.load())
		for {
			old := w.issued.Load()
			if old >= v || w.issued.CompareAndSwap(old, v) {
				v = max(v, old)
				break
			}
		}
		return 1, a.errorf("cuStreamWriteValue32_v2", a.cuStreamWriteValue32(s, w.s.dptr, v, streamWriteValueDefault))
	case gpu.Copy:
		if c.Bytes == 0 {
			return 0, nil
		}
		dst, src := c.Dst.(*buffer), c.Src.(*buffer)
		if dst.l.isFreed() || src.l.isFreed() {
			return 0, closedf("copy: buffer freed")
		}
		return 1, a.errorf("cuMemcpyAsync", a.cuMemcpyAsync(dst.dptr+uintptr(c.DstOff), src.dptr+uintptr(c.SrcOff), uint64(c.Bytes), s))
	case gpu.Fill:
		if c.N == 0 {
			return 0, nil
		}
		dst := c.Dst.(*buffer)
		if dst.l.isFreed() {
			return 0, closedf("fill: buffer freed")
		}
		return 1, k.fill(a, s, dst.dptr, c.DType, c.N, c.Value)
	case gpu.Arange:
		if c.N == 0 {
			return 0, nil
		}
		dst := c.Dst.(*buffer)
		if dst.l.isFreed() {
			return 0, closedf("arange: buffer freed")
		}
		return 1, k.arange(a, s, dst.dptr, c.DType, c.N, c.Start, c.Step)
	case gpu.Add:
		if c.N == 0 {
			return 0, nil
		}
		dst, x, y := c.Dst.(*buffer), c.A.(*buffer), c.B.(*buffer)
		if dst.l.isFreed() || x.l.isFreed() || y.l.isFreed() {
			return 0, closedf("add: buffer freed")
		}
		return 1, k.add(a, s, dst.dptr, x.dptr, y.dptr, c.DType, c.N)
	case gpu.Scale:
		if c.N == 0 {
			return 0, nil
		}
		dst, src := c.Dst.(*buffer), c.Src.(*buffer)
		if dst.l.isFreed() || src.l.isFreed() {
			return 0, closedf("scale: buffer freed")
		}
		return 1, k.scale(a, s, dst.dptr, src.dptr, c.DType, c.N, c.Factor)
	case gpu.PeerReduce:
		if c.N == 0 {
			return 0, nil
		}
		return k.peerReduce(a, s, c)
	}
	return 0, badArgf("unknown command %T", c)
}
