//go:build linux

package cuda

import (
	"time"

	"github.com/choreo-gpu/choreo/internal/spin"
)

// queryEvery is how much sleeping the poller does between two
// cuStreamQuery calls while the head of its queue is not complete.
const queryEvery = time.Millisecond

// pollLoop is the poller's body: it retires in-flight entries whose mark
// the completion word has reached, returns their budget to the issuer and
// completes their batches in order. It exits once the issuer has exited
// and nothing is in flight, or when Close gave up draining.
func (q *queue) pollLoop() {
	var bo backoff
	var slept time.Duration
	var timer *time.Timer
	for {
		q.mu.Lock()
		if q.forced {
			q.mu.Unlock()
			return
		}
		if len(q.inflight) == 0 {
			gone := q.issuerGone
			q.mu.Unlock()
			if gone {
				return
			}
			// The next batch is often microseconds away.
			spin.Until(min(idleSpin, spin.Budget()), func() bool { return len(q.pollerWake) > 0 })
			<-q.pollerWake
			bo.reset()
			continue
		}
		cur := q.comp.load()
		var done []*batch
		popped := false
		for len(q.inflight) > 0 {
			e := q.inflight[0]
			if e.marked && !reached(cur, e.seq) {
				break
			}
			q.inflight[0] = entry{}
			q.inflight = q.inflight[1:]
			q.nCmds -= e.cmds
			if e.counted {
				q.nBatches--
			}
			if e.last {
				done = append(done, e.b)
			}
			popped = true
		}
		q.mu.Unlock()
		if popped {
			wake(q.issuerWake)
			for _, b := range done {
				b.finish()
			}
			bo.reset()
			slept = 0
			continue
		}
		if d := bo.next(); d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			q.pollerNaps.Store(true)
			select {
			case <-timer.C:
			case <-q.pollerWake: // a CPU store: spin again
				timer.Stop() // Go >= 1.23 timers: no stale value to drain
				bo.reset()
			}
			q.pollerNaps.Store(false)
			slept += d
			if slept >= queryEvery {
				slept = 0
				q.checkStream()
			}
		}
	}
}

// checkStream asks the driver whether the stream failed (a kernel fault,
// an illegal address: errors that are sticky for the context). If so every
// in-flight batch completes with that error, and so does every later one.
func (q *queue) checkStream() {
	a := q.dev.api
	r := cudaSuccess
	err := onContext(a, q.dev.ctx, func() error { r = a.cuStreamQuery(q.stream); return nil })
	if err == nil && (r == cudaSuccess || r == cudaNotReady) {
		return
	}
	if err == nil {
		err = a.errorf("cuStreamQuery", r)
	}
	err = streamFailed(err) // a context that cannot be made current fails the stream too
	q.mu.Lock()
	if q.broken == nil {
		q.broken = err
	}
	left := q.inflight
	q.inflight = nil
	for _, e := range left {
		q.nCmds -= e.cmds
		if e.counted {
			q.nBatches--
		}
	}
	q.mu.Unlock()
	wake(q.issuerWake)
	for _, e := range left {
		if e.last {
			if e.b.err == nil {
				e.b.err = err
			}
			e.b.finish()
		}
	}
}
