//go:build linux

package cuda

import (
	"time"

	"github.com/choreo-gpu/choreo/internal/spin"
)

// watchSpin is how a watcher of a word in host-mapped memory (a CPU fence
// wait, a queue's completion poller) polls for the GPU's store: the GPU
// cannot wake a goroutine without cgo callbacks, so the watcher spins for
// 50 us whatever the processor count (the store lands within microseconds),
// then sleeps in steps that double from 4 us up to 250 us, which bound the
// CPU cost of a long wait. For its first 10 us the spin keeps its
// processor: yielding at once would hand the processor to what the watcher
// just woke (a fence update kicks the pollers, which the runtime queues on
// the updater's processor) and put the watcher at the back of the run
// queue just before the store lands.
var watchSpin = spin.Policy{
	Spin:     50 * time.Microsecond,
	Alone:    10 * time.Microsecond,
	Sleep:    4 * time.Microsecond,
	MaxSleep: 250 * time.Microsecond,
}

// idleSpin is how long an idle loop (a driver thread, the poller, the
// issuer) polls for new work before it parks: the next piece of work is
// often microseconds away. The poll costs one core for at most this long after
// each piece of work.
const idleSpin = 30 * time.Microsecond

// queryEvery is how much sleeping the poller does between two
// cuStreamQuery calls while the head of its queue is not complete.
const queryEvery = time.Millisecond

// reachedCyclic reports whether a completion word reading cur has passed
// mark seq. Mark sequence numbers wrap, so they compare cyclically, as the
// GPU's waits do; a fence word compares plainly (word.reached), as
// gpu.FenceWord says.
func reachedCyclic(cur, seq uint32) bool { return int32(cur-seq) >= 0 }

// kickPollers wakes every queue's poller that sleeps in its backoff: a
// CPU store is what lets a GPU wait pass, so completions are near, and a
// sleeping poller would notice them up to a sleep late. A poller that is
// still spinning needs no wake-up, and waking a goroutine costs the storer
// a trip through the scheduler. A kick that just misses a poller going to
// sleep costs at most that sleep.
func (d *Device) kickPollers() {
	if k := d.kicks.Load(); k != nil {
		for _, q := range *k {
			if q.pollerNaps.Load() {
				wake(q.pollerWake)
			}
		}
	}
}

// refreshKicksLocked republishes the open queues for kickPollers; d.mu is
// held.
func (d *Device) refreshKicksLocked() {
	kicks := make([]*queue, 0, len(d.queues))
	for q := range d.queues {
		kicks = append(kicks, q)
	}
	d.kicks.Store(&kicks)
}

// pollLoop is the poller's body: it retires in-flight entries whose mark
// the completion word has reached, returns their budget to the issuer and
// completes their batches in order. It exits once the issuer has exited
// and nothing is in flight, or when Close gave up draining.
func (q *queue) pollLoop() {
	bo := watchSpin.Backoff()
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
			bo.Reset()
			continue
		}
		cur := q.comp.load()
		var done []*batch
		popped := false
		for len(q.inflight) > 0 {
			e := q.inflight[0]
			if e.marked && !reachedCyclic(cur, e.seq) {
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
			bo.Reset()
			slept = 0
			continue
		}
		if d := bo.Next(); d > 0 {
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
				bo.Reset()
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
