package sim

import (
	"fmt"

	"github.com/choreo-gpu/choreo/gpu"
)

// inlineBytes is the most a Copy may move and still run on a goroutine
// other than the queue's worker (see inlineable): a small copy costs less
// than waking the worker, a large one would hold up the goroutine that
// happens to run it (the caller, or the comm task that raised a word).
const inlineBytes = 64 << 10

// run is one batch on its way through the queue: where it is (unit,
// command) and what failed so far. Exactly one goroutine advances a run at
// a time: the worker, the submitter that found the queue idle, or the
// writer of the word it is suspended on. A run that reaches a WaitValue
// whose word is not there yet does not block its goroutine: it suspends
// (queue.suspend), and whoever next raises the word resumes it.
type run struct {
	b        batch
	unit, i  int // the unit and the command to run next
	started  bool
	finished bool
	failed   []gpu.UnitError
	err      error // the batch's outcome, once finished
}

// runMode says which goroutine advances a run, which decides what it may
// do there. Whichever it is holds the queue's busy flag meanwhile, so runs
// (and the worker's calls of done) never overlap and keep their order.
type runMode uint8

const (
	// onWorker: the queue's worker goroutine.
	onWorker runMode = iota
	// onSubmit: the goroutine of a Submit that found the queue idle. Its
	// caller may hold locks that the batch's done takes (a stream's), so
	// the done is left to the worker.
	onSubmit
	// onWriter: the goroutine that raised the word the run was suspended
	// on, through StoreInline: it runs the rest of the batch and its done.
	onWriter
)

// step advances r until it finishes or reaches a WaitValue whose word is
// not there yet, which it returns (nil when r finished). Without ends a
// batch is one unit and its error comes back plain; with ends the failed
// units come back as a *gpu.BatchError. A queue aborted by Close fails the
// whole batch with a plain error wrapping gpu.ErrClosed. Command errors
// read "sim: <op>: command <i>: <cause>".
func (q *queue) step(r *run) (*word, uint32) {
	if !r.started {
		r.started = true
		if q.aborted.Load() {
			r.err, r.finished = errClosedf("queue closed before the batch ran"), true
			return nil, 0
		}
	}
	for !r.finished {
		end := len(r.b.cmds)
		if r.b.ends != nil {
			end = r.b.ends[r.unit]
		}
		var err error
		for ; r.i < end; r.i++ {
			c := r.b.cmds[r.i]
			if q.aborted.Load() {
				err = errClosedf("%s: command %d: queue closed before it ran", gpu.Name(c), r.i)
				break
			}
			if wv, ok := c.(gpu.WaitValue); ok {
				w := wv.Word.(*word)
				suspend, werr := q.waitValue(r.i, w, wv.Value)
				if suspend {
					return w, wv.Value
				}
				if werr != nil {
					err = fmt.Errorf("sim: %s: command %d: %w", gpu.Name(c), r.i, werr)
					break
				}
				continue
			}
			if cerr := q.exec1(r.i, c); cerr != nil {
				err = fmt.Errorf("sim: %s: command %d: %w", gpu.Name(c), r.i, cerr)
				break
			}
		}
		switch {
		case err == nil:
		case r.b.ends == nil || q.aborted.Load():
			r.err, r.finished = err, true
			return nil, 0
		default:
			r.failed = append(r.failed, gpu.UnitError{Unit: r.unit, Command: r.i, Err: err})
		}
		r.i = end
		r.unit++
		if r.b.ends == nil || r.unit == len(r.b.ends) {
			r.finished = true
		}
	}
	if r.err == nil && r.failed != nil {
		r.err = &gpu.BatchError{Units: r.failed}
	}
	return nil, 0
}

// drive advances r on the calling goroutine, in mode, until it finishes
// (then it ends the run as mode says, and reports true) or suspends on a
// word that someone else will raise (false: r is no longer the caller's).
func (q *queue) drive(r *run, mode runMode) bool {
	for {
		w, v := q.step(r)
		if w == nil {
			break
		}
		if q.suspend(r, w, v, mode) {
			return false
		}
	}
	q.finish(r, mode)
	return true
}

// finish ends a run that finished: its done joins q.dones, and the dones
// are called here if no other goroutine calls them now, except on a
// submitter (onSubmit), whose caller may hold locks that a done takes (a
// stream's): there the worker calls them.
//
// A writer (onWriter) that finds another goroutine calling dones (the
// worker, still in the done of the batch before) waits for it briefly
// first, as waiters do (waitSpin), rather than leave its done to it: that
// goroutine may be parked or preempted, and the done is what the caller
// waits for.
func (q *queue) finish(r *run, mode runMode) {
	q.mu.Lock()
	if mode == onWriter && q.calling {
		q.mu.Unlock()
		waitSpin.Until(func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return !q.calling
		})
		q.mu.Lock()
	}
	r.b.err = r.err
	q.dones = append(q.dones, r.b)
	q.cur, q.busy = batch{}, false
	if mode == onSubmit || q.calling {
		q.wakeWorkerLocked()
		return
	}
	q.calling = true
	q.callDones()
}

// wakeWorkerLocked (q.mu held, released here) hands the queue back to its
// worker if there is something for it to do: a resumed run, dones to call,
// a batch in the FIFO, or its exit once the queue is closing.
func (q *queue) wakeWorkerLocked() {
	wake := q.idle && (q.ready != nil || len(q.dones) > 0 && !q.calling ||
		q.susp == nil && !q.busy && (q.head < len(q.pending) || q.closing))
	if wake {
		q.idle = false
	}
	q.mu.Unlock()
	if wake {
		q.wakeCh <- struct{}{} // never blocks: the token was consumed before idle was set
	}
}

// suspend parks r on w (until w >= v) without holding a goroutine: the
// queue remembers r, w remembers the queue, and the next write to w
// resumes r (queue.wordChanged). If w got there meanwhile and r is still
// this goroutine's to take back, suspend reports false and the caller goes
// on with r.
func (q *queue) suspend(r *run, w *word, v uint32, mode runMode) bool {
	q.mu.Lock()
	q.susp, q.suspOn, q.suspV = r, w, v
	q.busy = false
	q.mu.Unlock()
	w.addCont(q)
	if !(w.reached(v) || w.freed.Load() || q.aborted.Load()) {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.susp != r {
		return true // a writer took it
	}
	q.susp, q.suspOn, q.busy = nil, nil, true
	return false
}

// wordChanged is called after every write to a word q is suspended on.
// Once the wait is over (the word reached, freed, or the queue aborted)
// the suspended run goes on: on the writer's goroutine where it wrote
// through StoreInline and the rest of the batch is small (inlineable),
// else on the worker. Otherwise q waits on the word again.
func (q *queue) wordChanged(w *word, inline bool) {
	for {
		q.mu.Lock()
		r, v := q.susp, q.suspV
		if r == nil || q.suspOn != w {
			q.mu.Unlock()
			return
		}
		if !(w.reached(v) || w.freed.Load() || q.aborted.Load()) {
			q.mu.Unlock()
			w.addCont(q)
			if w.reached(v) || w.freed.Load() || q.aborted.Load() {
				continue // raised meanwhile: the write may have missed us
			}
			return
		}
		q.susp, q.suspOn = nil, nil
		if inline && !q.closing && inlineable(r.b.cmds[r.i:]) {
			q.busy = true
			q.mu.Unlock()
			q.drive(r, onWriter)
			return
		}
		q.ready = r
		q.wakeWorkerLocked()
		return
	}
}

// inlineable reports whether cmds may run on a goroutine other than the
// worker's: fence waits and writes, and copies of at most inlineBytes.
func inlineable(cmds []gpu.Command) bool {
	for _, c := range cmds {
		switch c := c.(type) {
		case gpu.WaitValue, gpu.WriteValue:
		case gpu.Copy:
			if c.Bytes > inlineBytes {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// hasFenceOp reports whether cmds wait for or write a fence word: a batch
// worth running on its submitter, since what it unblocks waits on the
// word, not on the batch's done.
func hasFenceOp(cmds []gpu.Command) bool {
	for _, c := range cmds {
		switch c.(type) {
		case gpu.WaitValue, gpu.WriteValue:
			return true
		}
	}
	return false
}
