package sim

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// waitSpin is how a sim waiter (a fence wait on the CPU or on a queue, an
// idle queue) polls before it parks: 16 plain polls, then 4 after
// runtime.Gosched, which lets the goroutine that will write the word run.
// Waking a parked goroutine costs more than a fence round trip should, so
// waiters poll on any number of processors (unlike spin.Budget); the spin
// is short because sim goroutines (every rank's queue, comm and stream
// goroutines) outnumber the cores, and a longer one takes the processor
// from the goroutines doing the work.
var waitSpin = spin.Policy{Polls: 16, Yields: 4}

// word is a sim gpu.FenceWord: an atomic uint32 plus a wake-up that every
// write (Store, StoreInline, WriteValue, Reset, Free) fires. CPU waiters
// (Wait) first spin briefly, then park on a channel that the next write
// closes; a queue whose batch waits on the word (WaitValue) holds no
// goroutine: it is suspended on the word, and the next write resumes it
// (on the writer's goroutine for StoreInline, else on the queue's worker).
// Writes that raise nothing (Store of a smaller value) wake no one. After Free, waits on the word fail with gpu.ErrClosed
// while Load and Store keep working on the still-valid memory.
type word struct {
	dev     *Device
	v       atomic.Uint32
	waiters atomic.Int32 // parked or parking waiters, and suspended queues
	freed   atomic.Bool

	mu    sync.Mutex
	ch    chan struct{} // closed by the next write; nil when no one waits
	conts []*queue      // queues suspended on the word, resumed by the next write
}

var _ gpu.FenceWord = (*word)(nil)

func newWord(d *Device) *word { return &word{dev: d} }

// Load implements gpu.FenceWord.
func (w *word) Load() uint32 { return w.v.Load() }

// Store implements gpu.FenceWord: word = max(word, v).
func (w *word) Store(v uint32) { w.raise(v, false) }

// StoreInline is Store that runs, on the calling goroutine, what the write
// lets go on where that is little (fence waits and writes, small copies):
// the rest of a queue's batch suspended on the word, and its done
// callback. The caller must hold no lock that a done callback of a queue
// of this device may take. The fence package stores a CPU-side update this
// way, so the comm task that raised the word completes the GPU side's wait
// itself instead of waking the queue's worker to do it.
func (w *word) StoreInline(v uint32) { w.raise(v, true) }

// raise stores max(word, v) and wakes the waiters if the word changed.
func (w *word) raise(v uint32, inline bool) {
	for {
		old := w.v.Load()
		if old >= v {
			return
		}
		if w.v.CompareAndSwap(old, v) {
			w.wakeAll(inline)
			return
		}
	}
}

// Reset implements gpu.FenceWord.
func (w *word) Reset() {
	w.v.Store(0)
	w.wake()
}

// Free implements gpu.FenceWord: waits on the word fail with ErrClosed.
func (w *word) Free() { w.free() }

func (w *word) free() {
	if w.freed.Swap(true) {
		return
	}
	w.wake()
	w.dev.forgetWord(w)
}

// wake closes the current wait channel, if anyone may be waiting. The
// atomic store that precedes it and the waiters counter that arm raises
// before it reads the word make a lost wake-up impossible: either the
// writer sees the waiter, or the waiter sees the new value.
func (w *word) wake() { w.wakeAll(false) }

// wakeAll is wake that resumes suspended queues on this goroutine where
// inline (see StoreInline).
func (w *word) wakeAll(inline bool) {
	if w.waiters.Load() == 0 {
		return
	}
	w.mu.Lock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
	conts := w.conts
	w.conts = nil
	w.waiters.Add(-int32(len(conts)))
	w.mu.Unlock()
	for _, q := range conts {
		q.wordChanged(w, inline)
	}
}

// addCont suspends q on the word: the next write calls q.wordChanged. The
// caller looks at the word again afterwards, so a write in between is not
// missed.
func (w *word) addCont(q *queue) {
	w.waiters.Add(1)
	w.mu.Lock()
	w.conts = append(w.conts, q)
	w.mu.Unlock()
}

// arm registers a waiter and returns the channel the next write closes.
// The caller must re-check the word after arm and call disarm when done.
func (w *word) arm() <-chan struct{} {
	w.waiters.Add(1)
	w.mu.Lock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	ch := w.ch
	w.mu.Unlock()
	return ch
}

func (w *word) disarm() { w.waiters.Add(-1) }

// park parks until the next write to w, or until a or b is closed (a nil
// channel never is), and reports which: 0 for a write, 1 for a, 2 for b.
// It returns 0 at once if w is already >= v or freed, so a write between
// the caller's check and the parking is not missed.
func (w *word) park(v uint32, a, b <-chan struct{}) int {
	ch := w.arm()
	defer w.disarm()
	if w.reached(v) || w.freed.Load() {
		return 0
	}
	select {
	case <-ch:
		return 0
	case <-a:
		return 1
	case <-b:
		return 2
	}
}

// reached reports whether the word is >= v.
func (w *word) reached(v uint32) bool { return w.v.Load() >= v }

// Wait implements gpu.FenceWord: nil at once if the word is >= v; else it
// spins briefly and then parks until a write satisfies it, ctx is done
// (error wraps ctx.Err()), cancel is closed (error wraps gpu.ErrCanceled)
// or the word is freed (error wraps gpu.ErrClosed).
func (w *word) Wait(ctx context.Context, v uint32, cancel <-chan struct{}) error {
	if w.reached(v) {
		return nil
	}
	if waitSpin.Until(func() bool { return w.reached(v) || w.freed.Load() }) && w.reached(v) {
		return nil
	}
	for {
		if w.reached(v) {
			return nil
		}
		if w.freed.Load() {
			return errClosedf("fence wait for %d: word freed", v)
		}
		var cause error
		switch w.park(v, ctx.Done(), cancel) {
		case 0:
			continue
		case 1:
			cause = ctx.Err()
		default:
			cause = gpu.ErrCanceled
		}
		if w.reached(v) {
			return nil
		}
		return fmt.Errorf("sim: fence wait for %d (word at %d): %w", v, w.v.Load(), cause)
	}
}
