package choreotest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/gpu"
	_ "github.com/choreo-gpu/choreo/gpu/backends" // Open: every backend; "sim" and "sim-staged" always open
	"github.com/choreo-gpu/choreo/streams"
)

// Recorder is a gpu.Device that records every batch its queues accept and
// passes every call on to the device it wraps: buffers, fence words and
// properties are the wrapped device's own, commands run on its queues, and
// its errors come back unchanged. Queues made through the Recorder itself
// are labelled "q0", "q1"... in creation order; queues made through a
// Labeled view carry the view's label. Close closes the wrapped device.
// Methods are safe for concurrent use.
type Recorder struct {
	dev gpu.Device

	mu     sync.Mutex
	queues []*Queue
}

// Record wraps dev. The Recorder owns dev from now on: close the Recorder,
// not dev.
func Record(dev gpu.Device) (*Recorder, error) {
	if dev == nil {
		return nil, fmt.Errorf("choreotest: record: nil device: %w", gpu.ErrBadArgument)
	}
	return &Recorder{dev: dev}, nil
}

// Open opens the named backend's device (gpu.Open: "sim", "sim-staged",
// "cuda", "auto"...) and wraps it in a Recorder.
func Open(backend string) (*Recorder, error) {
	dev, err := gpu.Open(backend)
	if err != nil {
		return nil, fmt.Errorf("choreotest: open: %w", err)
	}
	return &Recorder{dev: dev}, nil
}

// Unwrap returns the wrapped device.
func (r *Recorder) Unwrap() gpu.Device { return r.dev }

// Properties implements gpu.Device: the wrapped device's.
func (r *Recorder) Properties() gpu.Properties { return r.dev.Properties() }

// NewQueue implements gpu.Device: a new queue of the wrapped device,
// recorded, labelled "q<index>".
func (r *Recorder) NewQueue() (gpu.Queue, error) { return r.newQueue("") }

// Alloc implements gpu.Device: the wrapped device's buffer, unwrapped.
func (r *Recorder) Alloc(n int, kind gpu.MemKind) (gpu.Buffer, error) { return r.dev.Alloc(n, kind) }

// NewFenceWord implements gpu.Device: the wrapped device's word, unwrapped.
func (r *Recorder) NewFenceWord() (gpu.FenceWord, error) { return r.dev.NewFenceWord() }

// Close implements gpu.Device: it closes the wrapped device. The records
// stay readable.
func (r *Recorder) Close() error { return r.dev.Close() }

// newQueue makes a recorded queue labelled label ("q<index>" if empty).
func (r *Recorder) newQueue(label string) (*Queue, error) {
	q, err := r.dev.NewQueue()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if label == "" {
		label = fmt.Sprintf("q%d", len(r.queues))
	}
	rq := &Queue{q: q, label: label, index: len(r.queues), changed: make(chan struct{})}
	r.queues = append(r.queues, rq)
	return rq, nil
}

// Queues returns every queue made so far, in creation order.
func (r *Recorder) Queues() []*Queue {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.queues)
}

// Queue returns the first queue made with label, or nil if there is none.
func (r *Recorder) Queue(label string) *Queue {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.queues {
		if q.label == label {
			return q
		}
	}
	return nil
}

// Labeled returns a view of the Recorder whose queues carry label, so a
// test can tell its streams apart (one view per rank, say). The view is a
// gpu.Device of its own (a stream's Device() is the view) over the same
// wrapped device: buffers, words and queues are the wrapped device's and
// recorded by r. Closing the view only makes its later NewQueue, Alloc and
// NewFenceWord fail with gpu.ErrClosed; r.Close closes the device.
func (r *Recorder) Labeled(label string) gpu.Device { return &view{r: r, label: label} }

// NewStream starts a GPU stream on a Labeled view of r and returns it with
// the queue that records it. The runtime closes the stream.
func (r *Recorder) NewStream(rt *actors.Runtime, label string) (*streams.GPU, *Queue, error) {
	v := &view{r: r, label: label}
	s, err := streams.NewGPU(rt, v)
	if err != nil {
		return nil, nil, fmt.Errorf("choreotest: new stream %q: %w", label, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.queues) != 1 {
		return nil, nil, fmt.Errorf("choreotest: new stream %q: the stream made %d queues, want 1", label, len(v.queues))
	}
	return s, v.queues[0], nil
}

// view is a Labeled view of a Recorder.
type view struct {
	r      *Recorder
	label  string
	closed atomic.Bool

	mu     sync.Mutex
	queues []*Queue // made through this view
}

func (v *view) Properties() gpu.Properties { return v.r.dev.Properties() }

func (v *view) NewQueue() (gpu.Queue, error) {
	if v.closed.Load() {
		return nil, fmt.Errorf("choreotest: view %q: new queue: %w", v.label, gpu.ErrClosed)
	}
	q, err := v.r.newQueue(v.label)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	v.queues = append(v.queues, q)
	v.mu.Unlock()
	return q, nil
}

func (v *view) Alloc(n int, kind gpu.MemKind) (gpu.Buffer, error) {
	if v.closed.Load() {
		return nil, fmt.Errorf("choreotest: view %q: alloc: %w", v.label, gpu.ErrClosed)
	}
	return v.r.dev.Alloc(n, kind)
}

func (v *view) NewFenceWord() (gpu.FenceWord, error) {
	if v.closed.Load() {
		return nil, fmt.Errorf("choreotest: view %q: new fence word: %w", v.label, gpu.ErrClosed)
	}
	return v.r.dev.NewFenceWord()
}

func (v *view) Close() error {
	v.closed.Store(true)
	return nil
}

// Queue is a gpu.Queue that records every batch the wrapped queue accepted,
// in the order it accepted them, with the unit ends it was given and, once
// the batch has completed, its outcome. A batch the wrapped queue refused
// (Submit returned an error) did not run and is not recorded. Submissions
// are serialised, so the record's order is the queue's. Methods are safe
// for concurrent use.
type Queue struct {
	q     gpu.Queue
	label string
	index int

	submitMu sync.Mutex // one submission at a time: record order = queue order

	mu       sync.Mutex
	batches  []*batchRec
	inflight int           // accepted batches not yet completed
	changed  chan struct{} // closed and replaced when a batch completes
	closed   bool
}

// batchRec is one recorded batch; recorded, done and err are under the
// queue's mu.
type batchRec struct {
	cmds     []gpu.Command
	ends     []int
	recorded bool // in q.batches
	done     bool
	err      error
}

// Batch is one batch a Queue accepted: its commands in order, the unit ends
// given to SubmitUnits (nil for Submit or a single unit), and whether it
// has completed, with what error.
type Batch struct {
	Commands  []gpu.Command
	Ends      []int
	Completed bool
	Err       error
}

// Units splits the batch into its units (gpu.ValidateUnits's ends); an
// empty batch has none.
func (b Batch) Units() [][]gpu.Command {
	if len(b.Commands) == 0 {
		return nil
	}
	if len(b.Ends) == 0 {
		return [][]gpu.Command{b.Commands}
	}
	units := make([][]gpu.Command, 0, len(b.Ends))
	lo := 0
	for _, hi := range b.Ends {
		units = append(units, b.Commands[lo:hi])
		lo = hi
	}
	return units
}

// Label is the queue's label: "q<index>" or its view's label.
func (q *Queue) Label() string { return q.label }

// Index is the queue's place in its Recorder's creation order.
func (q *Queue) Index() int { return q.index }

// String names the queue.
func (q *Queue) String() string { return fmt.Sprintf("queue %d (%s)", q.index, q.label) }

// Submit implements gpu.Queue: it passes the batch on and records it if
// the wrapped queue accepts it.
func (q *Queue) Submit(batch []gpu.Command, done func(error)) error {
	return q.submit(batch, nil, false, done)
}

// SubmitUnits implements gpu.Queue: it passes the batch and its unit ends
// on and records them if the wrapped queue accepts them.
func (q *Queue) SubmitUnits(batch []gpu.Command, ends []int, done func(error)) error {
	return q.submit(batch, ends, true, done)
}

func (q *Queue) submit(batch []gpu.Command, ends []int, units bool, done func(error)) error {
	// Copies: the caller may reuse its slices once Submit has returned.
	rec := &batchRec{cmds: slices.Clone(batch), ends: slices.Clone(ends)}
	wrapped := func(err error) {
		q.finish(rec, err)
		if done != nil {
			done(err)
		}
	}
	q.submitMu.Lock()
	defer q.submitMu.Unlock()
	q.mu.Lock()
	q.inflight++
	q.mu.Unlock()
	var err error
	if units {
		err = q.q.SubmitUnits(batch, ends, wrapped)
	} else {
		err = q.q.Submit(batch, wrapped)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil { // refused: done will not be called
		q.inflight--
		q.signalLocked()
		return err
	}
	q.recordLocked(rec)
	return nil
}

// recordLocked appends an accepted batch to the record, once: from submit
// or, if the batch completes before the wrapped Submit has returned, from
// finish, so that a completion is never seen before its batch. Either way
// submitMu is held by this batch's submitter, so the order is kept.
func (q *Queue) recordLocked(rec *batchRec) {
	if !rec.recorded {
		rec.recorded = true
		q.batches = append(q.batches, rec)
	}
}

// finish records a batch's completion.
func (q *Queue) finish(rec *batchRec, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.recordLocked(rec) // done is called only for accepted batches
	rec.done, rec.err = true, err
	q.inflight--
	q.signalLocked()
}

func (q *Queue) signalLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Close implements gpu.Queue: it closes the wrapped queue.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	return q.q.Close(ctx)
}

// Closed reports whether Close has been called.
func (q *Queue) Closed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// Idle waits, bounded by ctx, until every batch accepted so far has
// completed.
func (q *Queue) Idle(ctx context.Context) error {
	for {
		q.mu.Lock()
		n, ch := q.inflight, q.changed
		q.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("choreotest: %s: %d batches still running: %w", q, n, ctx.Err())
		}
	}
}

// Len is how many batches have been recorded.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.batches)
}

// Batches returns the recorded batches, oldest first.
func (q *Queue) Batches() []Batch { return q.batchesFrom(0) }

// batchesFrom returns the recorded batches from index i on.
func (q *Queue) batchesFrom(i int) []Batch {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i > len(q.batches) {
		i = len(q.batches)
	}
	out := make([]Batch, 0, len(q.batches)-i)
	for _, b := range q.batches[i:] {
		out = append(out, Batch{Commands: b.cmds, Ends: b.ends, Completed: b.done, Err: b.err})
	}
	return out
}

// Commands returns every recorded command, in queue order.
func (q *Queue) Commands() []gpu.Command {
	var out []gpu.Command
	for _, b := range q.Batches() {
		out = append(out, b.Commands...)
	}
	return out
}

// Steps returns every recorded command as a Step name, in queue order.
func (q *Queue) Steps() []string { return mapCmds(q.Commands(), Step) }

// Details returns every recorded command as a Detail, in queue order.
func (q *Queue) Details() []string { return mapCmds(q.Commands(), Detail) }

// Units returns every recorded unit, in queue order, as its steps joined
// by "+": a stream makes each Enqueue call a unit, so a fence update
// enqueued with the copy it follows reads "copy-d2h+update".
func (q *Queue) Units() []string { return unitSteps(q.Batches()) }

func unitSteps(batches []Batch) []string {
	var out []string
	for _, b := range batches {
		for _, u := range b.Units() {
			out = append(out, strings.Join(mapCmds(u, Step), "+"))
		}
	}
	return out
}

func mapCmds(cmds []gpu.Command, f func(gpu.Command) string) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = f(c)
	}
	return out
}
