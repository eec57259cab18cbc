package fence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
	"github.com/choreo-gpu/choreo/trace"
)

// Input is a value a GPU-side update waits for: its readiness Event on a
// GPU stream (arrays implement it).
type Input interface {
	Event() streams.Event
}

// Guarded is an output a GPU-side wait protects: if the fence is released
// by failure, Fail is called with the cause before any GPU wait passes, so
// the output never reads as valid data. Fail runs outside the fence's lock
// and a panic in it is recovered; it must not block.
type Guarded interface {
	Fail(err error)
}

// noCopy makes go vet's copylocks check report any copy of a Fence, so
// no copy can become a second releaser.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// Fence is the single shared handle of one fence: pass the pointer
// through messages, closures and retries; there is no other handle, and
// copying the struct is reported by go vet. Its methods are safe for
// concurrent use. Every path out of a choreography must end in Release or
// Fail; a handle dropped without either is released by a cleanup.
type Fence struct {
	_  noCopy
	st *state
}

// pair is the two words of a fence: gpu is written only by GPU commands and
// read by CPU waits; cpu is written only by the CPU and read by GPU waits.
type pair struct {
	gpu, cpu gpu.FenceWord
}

// state is everything a fence is, apart from its handle; the manager and the
// cleanup hold it, so the handle can be collected while the fence lives on.
type state struct {
	id       uint64
	label    string // WithName's, formatted into errors only when needed
	mgr      *Manager
	pool     *pool
	words    pair
	deadline time.Time     // under mu (SetTimeout)
	released chan struct{} // closed by release

	mu         sync.Mutex
	gpuCount   uint32
	cpuCount   uint32
	done       bool  // released (no new step is taken)
	stopped    bool  // the stop value is stored: the words may be recycled
	cause      error // why, for waiters; nil until released
	pending    int   // queued GPU commands that name the words
	returned   bool  // words handed back to the manager
	guarded    []Guarded
	maxGPUWait uint32
	cpuUpdated uint32
	trace      []Step

	rec       *trace.Recorder // nil: not traced (WithTrace)
	track     string          // the CPU side's track
	gpuTracks []string        // the GPU streams the fence was used on (traced only)
}

// ID is the fence's number, unique within its manager.
func (f *Fence) ID() uint64 { return f.st.id }

// String names the fence for logs and errors.
func (f *Fence) String() string { return f.st.String() }

// String names the fence: its id and label.
func (st *state) String() string { return fenceName(st.id, st.label) }

func fenceName(id uint64, label string) string {
	if label == "" {
		return fmt.Sprint(id)
	}
	return fmt.Sprintf("%d(%s)", id, label)
}

// releasedError is why a wait after a normal release passed: "fence N:
// fence released" (ErrReleased), formatted only when read. It holds the
// fence's id and label, not its state, which is recycled.
type releasedError struct {
	id    uint64
	label string
}

func (e releasedError) Error() string {
	return "fence " + fenceName(e.id, e.label) + ": " + ErrReleased.Error()
}
func (e releasedError) Unwrap() error { return ErrReleased }

// Deadline is when the watchdog releases the fence if nothing else has.
func (f *Fence) Deadline() time.Time {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	return f.st.deadline
}

// SetTimeout moves the deadline to d from now: a choreography whose task
// waited in a queue gives the fence its full time once the task starts.
func (f *Fence) SetTimeout(d time.Duration) {
	f.st.mu.Lock()
	f.st.deadline = time.Now().Add(d)
	f.st.mu.Unlock()
}

// Released reports whether the fence has been released.
func (f *Fence) Released() bool {
	select {
	case <-f.st.released:
		return true
	default:
		return false
	}
}

// Err is nil while the fence is live; afterwards an error wrapping
// ErrReleased (and the cause, for a release by failure).
func (f *Fence) Err() error {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	return f.st.cause
}

// Trace returns the calls made on the fence so far, GPU-side calls in the
// order they were encoded and CPU-side calls in the order they were made.
func (f *Fence) Trace() []Step {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	return append([]Step(nil), f.st.trace...)
}

// UpdateGPU encodes on s, after everything already enqueued there, a raise
// of the GPU word to the GPU side's next count: the CPU side's matching
// Wait returns once x (and all earlier work on s) is complete and visible
// to the CPU. x may be nil. If x is produced on another stream and not yet
// complete, UpdateGPU fails with ErrCrossStream.
func (f *Fence) UpdateGPU(s *streams.GPU, x Input) error {
	return f.UpdateGPUAfter(s, x, nil, nil)
}

// UpdateGPUAfter is UpdateGPU with cmds enqueued just before the update, as
// one unit: if one of them fails, the update does not run and the fence
// fails, so the CPU side never takes the update for their completion. done,
// if not nil, is called exactly once: with their outcome, before the fence
// hears of it, or with the error when UpdateGPUAfter fails (cmds then do
// not run).
func (f *Fence) UpdateGPUAfter(s *streams.GPU, x Input, cmds []gpu.Command, done func(error)) error {
	st := f.st
	if s == nil {
		return refuse(done, fmt.Errorf("fence %s: update_gpu: nil stream: %w", st, gpu.ErrBadArgument))
	}
	if x != nil {
		if ev := x.Event(); ev.Valid() && ev.Stream() != s && !ev.Done() {
			return refuse(done, fmt.Errorf("fence %s: update_gpu on %s: %w (%s)", st, s.Name(), ErrCrossStream, ev.Stream().Name()))
		}
	}
	st.mu.Lock()
	if st.done {
		cause := st.cause
		st.mu.Unlock()
		return refuse(done, fmt.Errorf("fence %s: update_gpu: %w", st, cause))
	}
	st.gpuCount++
	v := st.gpuCount
	st.trace = append(st.trace, Step{GPUSide, OpUpdate, v})
	st.pending++
	st.noteTrackLocked(s)
	st.mu.Unlock()
	cb := st.doneThen(done)
	batch := append(cmds[:len(cmds):len(cmds)], gpu.WriteValue{Word: st.words.gpu, Value: v})
	note := trace.Note{Name: "fence update", Fence: st.id, Value: v, Word: trace.GPUWord, Flow: trace.FlowOut}
	if _, err := s.EnqueueNoted(batch, cb, note); err != nil {
		cb(err)
		return fmt.Errorf("fence %s: update_gpu(%d): %w", st, v, err)
	}
	return nil
}

// refuse tells done, if any, of err, a GPU-side step refused before it
// was enqueued, and returns err.
func refuse(done func(error), err error) error {
	if done != nil {
		done(err)
	}
	return err
}

// doneThen is a GPU-side step's completion: done (if any) hears the
// outcome of its commands before the fence does.
func (st *state) doneThen(done func(error)) func(error) {
	if done == nil {
		return st.commandDone
	}
	return func(err error) {
		done(err)
		st.commandDone(err)
	}
}

// WaitGPU encodes on s a wait for the CPU word to reach the GPU side's next
// count: every later command on s is held back until the CPU side's
// matching Update (or a release). out, if not nil, is failed if the
// fence is released by failure. The returned Event completes once the
// stream has passed the wait: it is the readiness of out.
func (f *Fence) WaitGPU(s *streams.GPU, out Guarded) (streams.Event, error) {
	return f.WaitGPUThen(s, out, nil, nil)
}

// WaitGPUThen is WaitGPU with cmds enqueued just after the wait, as one
// unit (one batch on the queue, where two Enqueues could be two): if one
// of them fails, the fence fails, as if the wait had. done, if not nil, is
// called exactly once: with their outcome, before the fence hears of it,
// or with the error when WaitGPUThen fails (cmds then do not run). The
// returned Event completes once the stream has passed the wait and run
// cmds.
func (f *Fence) WaitGPUThen(s *streams.GPU, out Guarded, cmds []gpu.Command, done func(error)) (streams.Event, error) {
	st := f.st
	if s == nil {
		return streams.Event{}, refuse(done, fmt.Errorf("fence %s: wait_gpu: nil stream: %w", st, gpu.ErrBadArgument))
	}
	st.mu.Lock()
	if st.done {
		cause := st.cause
		st.mu.Unlock()
		if out != nil {
			failGuarded(out, cause)
		}
		return streams.Event{}, refuse(done, fmt.Errorf("fence %s: wait_gpu: %w", st, cause))
	}
	st.gpuCount++
	v := st.gpuCount
	st.trace = append(st.trace, Step{GPUSide, OpWait, v})
	st.maxGPUWait = v
	if out != nil {
		st.guarded = append(st.guarded, out)
	}
	st.pending++
	st.noteTrackLocked(s)
	st.mu.Unlock()
	cb := st.doneThen(done)
	batch := append([]gpu.Command{gpu.WaitValue{Word: st.words.cpu, Value: v}}, cmds...)
	note := trace.Note{Name: "fence wait", Fence: st.id, Value: v, Word: trace.CPUWord, Flow: trace.FlowIn}
	ev, err := s.EnqueueNoted(batch, cb, note)
	if err != nil {
		cb(err)
		return streams.Event{}, fmt.Errorf("fence %s: wait_gpu(%d): %w", st, v, err)
	}
	return ev, nil
}

// Wait blocks until the GPU side's matching UpdateGPU has landed (the CPU
// side's next count is reached), the fence is released (an error wrapping
// ErrReleased and the cause), or ctx ends (an error wrapping ErrTimeout and
// ctx.Err() for a deadline). It never waits without a bound when ctx has
// one, and the fence's own deadline releases it in any case.
func (f *Fence) Wait(ctx context.Context) error {
	st := f.st
	st.mu.Lock()
	if st.done {
		defer st.mu.Unlock()
		return fmt.Errorf("fence %s: wait: %w", st, st.cause)
	}
	st.cpuCount++
	v := st.cpuCount
	st.trace = append(st.trace, Step{CPUSide, OpWait, v})
	st.mu.Unlock()
	t0 := st.rec.Now()
	err := st.words.gpu.Wait(ctx, v, st.released)
	if st.rec != nil {
		st.traceWait(t0, v, err)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gpu.ErrCanceled):
		return fmt.Errorf("fence %s: wait(%d): %w", st, v, f.Err())
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("fence %s: wait(%d): %w: %w", st, v, ErrTimeout, err)
	default:
		return fmt.Errorf("fence %s: wait(%d): %w", st, v, err)
	}
}

// Update raises the CPU word to the CPU side's next count, letting the GPU
// side's matching WaitGPU pass. After a release it returns the release's
// error and changes nothing: a released fence stays released.
//
// The store is made outside the fence's lock, and where the word offers
// it (an inlineStorer), on the calling goroutine all the way: a GPU-side
// wait the store satisfies, and what follows it in its batch where that
// is little, runs and completes here instead of on the queue's own
// goroutine (one hand-off fewer on a collective's critical path). So
// Update must be called with no lock held that a GPU stream's completion
// callbacks take.
func (f *Fence) Update() error {
	st := f.st
	st.mu.Lock()
	if st.done {
		defer st.mu.Unlock()
		return fmt.Errorf("fence %s: update: %w", st, st.cause)
	}
	st.cpuCount++
	v := st.cpuCount
	st.trace = append(st.trace, Step{CPUSide, OpUpdate, v})
	st.cpuUpdated = v
	st.mu.Unlock()
	t0 := st.rec.Now()
	// A release between the unlock and the store has stored the stop
	// value already: a word only grows, so this store changes nothing.
	if w, ok := st.words.cpu.(inlineStorer); ok {
		w.StoreInline(v)
	} else {
		st.words.cpu.Store(v)
	}
	if st.rec != nil {
		st.rec.Span("fence", st.track, "fence update", t0,
			trace.Event{Fence: st.id, Value: v, Word: trace.CPUWord, Flow: trace.FlowOut, FlowTS: t0})
	}
	return nil
}

// inlineStorer is a fence word whose store can run what it unblocks on the
// storing goroutine (the sim's words).
type inlineStorer interface {
	StoreInline(v uint32)
}

// Release ends the fence normally. If a GPU wait is still waiting for a CPU
// update that never came, that is a failure: the guarded outputs are failed
// with ErrReleased. Idempotent; later calls change nothing.
func (f *Fence) Release() { f.st.release(nil) }

// Fail releases the fence by failure: the guarded outputs fail with an error
// wrapping ErrReleased and cause, then every wait passes.
// Idempotent: only the first release counts.
func (f *Fence) Fail(cause error) {
	if cause == nil {
		cause = errors.New("failed")
	}
	f.st.release(cause)
}

// release implements Release and Fail: mark guarded outputs failed, store
// the stop value once, wake CPU waiters, tell the manager. The guarded
// outputs' Fail is user code: it runs outside the fence's lock, recovered,
// and before the stop value lets any GPU wait pass, so no guarded output
// is read as valid before it is marked failed.
func (st *state) release(cause error) {
	st.mu.Lock()
	if st.done {
		st.mu.Unlock()
		return
	}
	st.done = true
	if cause == nil && st.cpuUpdated < st.maxGPUWait {
		cause = fmt.Errorf("released before the CPU update %d the GPU waits for", st.maxGPUWait)
	}
	var guarded []Guarded
	if cause != nil {
		st.cause = fmt.Errorf("fence %s: %w: %w", st, ErrReleased, cause)
		guarded = st.guarded
	} else {
		st.cause = releasedError{st.id, st.label} // formatted only if read: a normal release is every collective's
	}
	st.guarded = nil
	failed := st.cause
	st.mu.Unlock()
	if cause != nil && st.rec != nil {
		st.rec.Instant("fence", st.track, "fence failed", trace.Event{Fence: st.id, Err: failed.Error()})
	}
	for _, g := range guarded {
		failGuarded(g, failed)
	}
	st.words.cpu.Store(gpu.StopValue)
	close(st.released)
	st.mu.Lock()
	st.stopped = true
	idle := st.takeIdleLocked()
	st.mu.Unlock()
	st.mgr.forget(st)
	if idle {
		st.mgr.recycle(st)
	}
}

// failGuarded calls g.Fail(err); a panic in it is recovered and dropped:
// the fence's release must go on, and the output's failure is the cause
// anyway.
func failGuarded(g Guarded, err error) {
	defer func() { _ = recover() }()
	g.Fail(err)
}

// commandDone is the completion callback of every GPU command that names
// the fence's words. A failed command releases the fence by failure, so the
// CPU side does not wait for a GPU update that will never come.
func (st *state) commandDone(err error) {
	if err != nil {
		st.release(fmt.Errorf("gpu command failed: %w", err))
	}
	st.mu.Lock()
	st.pending--
	idle := st.takeIdleLocked()
	st.mu.Unlock()
	if idle {
		st.mgr.recycle(st)
	}
}

// takeIdleLocked reports, exactly once, that the fence is released and no
// queued command names its words any more: only then may they be reused.
func (st *state) takeIdleLocked() bool {
	if st.stopped && st.pending == 0 && !st.returned {
		st.returned = true
		return true
	}
	return false
}
