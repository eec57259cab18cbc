package streams

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/trace"
)

// Limits of what a stream hands its queue at once: how many batches it
// keeps in flight before it gathers later commands into one batch, and how
// many commands a gathered batch holds.
const (
	maxInflight = 4
	maxBatch    = 512
)

// GPU is the handle of a GPU stream: one in-order queue on one device. The
// actor behind it is the backend's queue itself (gpu.Queue: its FIFO and
// its worker own the order and run each batch), and GPU is the thin sender
// that numbers what it sends. An Enqueue that finds fewer than maxInflight
// of the stream's batches in flight hands it straight to the queue, on the
// caller's goroutine; otherwise it is gathered, and the completion of a
// batch in flight submits what was gathered as one batch (one unit per
// Enqueue), on the backend's goroutine. So a lone command reaches the
// queue's worker with one hand-off, and a burst costs the queue one batch,
// not one per command. (A protoactor mailbox in front of the queue added
// a second hand-off to every command, and a second FIFO before the
// queue's own.) Where the queue is a gpu.Poster (CUDA), the stream posts:
// the queue's own goroutine makes the driver calls, never Enqueue's
// caller, which goes on at once to its next call.
//
// Enqueue is safe for concurrent use; the commands of one caller run in
// the order that caller enqueued them, and all commands run in the order in
// which their Enqueue calls returned. Close stops accepting commands,
// submits what was gathered and closes the queue; afterwards Enqueue
// returns ErrClosed.
type GPU struct {
	name string
	dev  gpu.Device
	q    gpu.Queue
	post gpu.Poster // q, where it is one: batches are posted, not submitted
	log  *zap.Logger

	mu       sync.Mutex // orders submission with nextSeq; guards what follows
	nextSeq  uint64
	closed   bool
	inflight int           // the stream's batches submitted and not done
	gathered []*encode     // waiting for a batch in flight to finish, in order
	drained  chan struct{} // closed once gathered is empty after Close

	completed atomic.Uint64                 // highest sequence number completed
	progress  atomic.Pointer[chan struct{}] // closed and replaced at a completion someone parks for
	parked    atomic.Int32                  // waiters parked on progress
	dead      chan struct{}                 // closed when the stream has shut down
	closeOnce sync.Once
	closeErr  error

	rec     atomic.Pointer[trace.Recorder] // nil: not traced (see TraceTo)
	lastEnd atomic.Int64                   // when the last traced batch was seen complete
}

// encode is one Enqueue: its commands, its done callback and its sequence
// number. The callback runs at most once; a panic in it is the caller's
// bug, logged and recovered, so the stream goes on.
type encode struct {
	cmds []gpu.Command
	done func(error)
	seq  uint64
	note trace.Note // what the commands are on the timeline (traced only)
	enq  int64      // when it was enqueued (traced only)
}

// hasWait reports whether the message holds a GPU-side wait: such a
// message starts a batch, so that the commands before it report their
// completion without waiting for the wait to pass.
func (e *encode) hasWait() bool {
	for _, c := range e.cmds {
		if _, ok := c.(gpu.WaitValue); ok {
			return true
		}
	}
	return false
}

var gpuStreamCount atomic.Uint64

// NewGPU starts a GPU stream with a new queue on dev. The runtime closes
// the stream when it closes.
func NewGPU(rt *actors.Runtime, dev gpu.Device) (*GPU, error) {
	if rt == nil || dev == nil {
		return nil, fmt.Errorf("streams: new gpu stream: nil runtime or device: %w", gpu.ErrBadArgument)
	}
	q, err := dev.NewQueue()
	if err != nil {
		return nil, fmt.Errorf("streams: new gpu stream: %w", err)
	}
	s := &GPU{dev: dev, q: q, log: rt.Logger(), dead: make(chan struct{}),
		name: fmt.Sprintf("gpu-%s-%d", dev.Properties().Backend, gpuStreamCount.Add(1))}
	s.post, _ = q.(gpu.Poster)
	ch := make(chan struct{})
	s.progress.Store(&ch)
	if err := rt.Adopt(s.name, s); err != nil {
		_ = s.Close(context.Background())
		return nil, fmt.Errorf("streams: new gpu stream: %w", err)
	}
	return s, nil
}

// Name is the stream's name.
func (s *GPU) Name() string { return s.name }

// Device is the device the stream runs on.
func (s *GPU) Device() gpu.Device { return s.dev }

// Enqueue validates cmds and hands them to the queue without waiting for
// them or for a reply. done, if not nil, is called once when they have
// completed or failed, from the backend's completion goroutine: it must not
// block. If Enqueue returns an error, nothing was enqueued and done is not
// called.
// The returned Event completes after the commands (and everything enqueued
// before them) have. One Enqueue is one unit: a command that fails skips
// the rest of its own commands only and fails only its own done; later
// commands on the stream still run.
func (s *GPU) Enqueue(cmds []gpu.Command, done func(error)) (ev Event, err error) {
	return s.EnqueueNoted(cmds, done, trace.Note{})
}

// EnqueueNoted is Enqueue with a note that names the commands on the
// stream's trace (a fence's update or wait, and its flow); without a
// Recorder the note is ignored.
func (s *GPU) EnqueueNoted(cmds []gpu.Command, done func(error), note trace.Note) (ev Event, err error) {
	if err := gpu.ValidateBatch(cmds); err != nil {
		return Event{}, fmt.Errorf("streams: %s: enqueue: %w", s.name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Event{}, fmt.Errorf("streams: %s: enqueue: %w", s.name, ErrClosed)
	}
	m := &encode{cmds: cmds, done: done, seq: s.nextSeq + 1}
	if rec := s.rec.Load(); rec != nil {
		m.note, m.enq = note, rec.Now()
	}
	if s.inflight >= maxInflight || len(s.gathered) > 0 {
		s.gathered = append(s.gathered, m)
		s.nextSeq++
		return Event{s: s, seq: m.seq}, nil
	}
	if err := s.submitLocked([]*encode{m}); err != nil {
		return Event{}, fmt.Errorf("streams: %s: enqueue: %w", s.name, err)
	}
	s.nextSeq++
	return Event{s: s, seq: m.seq}, nil
}

// submitLocked hands msgs to the queue as one batch, one unit per message:
// posted where the queue is a gpu.Poster, else submitted. A panic in the
// backend's Submit is a backend bug: it is recovered into the error
// (wrapping ErrPanic).
func (s *GPU) submitLocked(msgs []*encode) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("streams: %s: submit: %w: %v", s.name, ErrPanic, r)
		}
	}()
	var cmds []gpu.Command
	var ends []int
	units := make([]int, len(msgs)) // message -> unit; -1: no commands
	if len(msgs) == 1 {
		cmds, units[0] = msgs[0].cmds, 0
	} else {
		for i, m := range msgs {
			units[i] = -1
			if len(m.cmds) > 0 {
				cmds = append(cmds, m.cmds...)
				ends = append(ends, len(cmds))
				units[i] = len(ends) - 1
			}
		}
	}
	last := msgs[len(msgs)-1].seq
	rec := s.rec.Load()
	sub := rec.Now()
	done := func(err error) {
		if rec != nil {
			s.traceBatch(rec, msgs, units, sub, err)
		}
		for i, m := range msgs {
			s.finish(m, gpu.UnitErr(err, units[i]))
		}
		s.complete(last)
		s.batchDone()
	}
	switch {
	case s.post != nil:
		err = s.post.PostUnits(cmds, ends, done) // nil ends: one unit, as Submit
	case len(msgs) == 1:
		err = s.q.Submit(cmds, done)
	default:
		err = s.q.SubmitUnits(cmds, ends, done)
	}
	if err == nil {
		s.inflight++
	}
	return err
}

// TraceTo records the stream's commands into r from now on (nil stops):
// each batch as a span on the stream's track, from when the queue could
// start it (its submission, or the previous batch's completion) to its
// completion as the backend reports it.
func (s *GPU) TraceTo(r *trace.Recorder) { s.rec.Store(r) }

// Traced is the Recorder TraceTo set, or nil.
func (s *GPU) Traced() *trace.Recorder { return s.rec.Load() }

// traceBatch records a completed batch: its first message as a span, the
// others as instants at its end (they ran inside the same span). A fence
// update's flow leaves at the span's start, a fence wait's lands at its
// end: the update ran after the first, the wait passed before the second.
func (s *GPU) traceBatch(rec *trace.Recorder, msgs []*encode, units []int, sub int64, err error) {
	end := rec.Now()
	start := max(sub, s.lastEnd.Swap(end))
	for i, m := range msgs {
		e := trace.Event{Kind: trace.Span, Cat: "gpu", Track: s.name, Name: m.note.Name, TS: start, Dur: end - start,
			Fence: m.note.Fence, Value: m.note.Value, Word: m.note.Word, Flow: m.note.Flow,
			Count: len(m.cmds), Enqueued: m.enq, Submitted: sub}
		if e.Name == "" {
			e.Name = commandName(m.cmds)
		}
		if i > 0 {
			e.Kind, e.TS, e.Dur = trace.Instant, end, 0
		}
		switch m.note.Flow {
		case trace.FlowOut:
			e.FlowTS = start
		case trace.FlowIn:
			e.FlowTS = max(start, end-1)
		}
		if uerr := gpu.UnitErr(err, units[i]); uerr != nil {
			e.Err = uerr.Error()
		}
		rec.Record(e)
	}
}

// commandName names a message's commands on a trace by the last of them.
func commandName(cmds []gpu.Command) string {
	if len(cmds) == 0 {
		return "marker"
	}
	return gpu.Name(cmds[len(cmds)-1])
}

// finish runs a message's callback, recovering a panic in it.
func (s *GPU) finish(m *encode, err error) {
	if m.done == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("done callback of a GPU stream command panicked; recovered",
				zap.String("stream", s.name), zap.Uint64("seq", m.seq), zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	m.done(err)
}

// batchDone ends one batch in flight and submits what was gathered
// meanwhile, as runs of messages of which only the first may hold a
// GPU-side wait: the commands before a wait report their completion
// without waiting for it to pass, and those after it could not complete
// before it anyway. (A wait alone per batch doubles the batches of a
// pipeline of waits and updates, and the CUDA queue keeps at most 64
// batches on the GPU; the rest wait for a completion to be issued.)
func (s *GPU) batchDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	for s.inflight < maxInflight && len(s.gathered) > 0 {
		n, cmds := 1, len(s.gathered[0].cmds)
		for n < len(s.gathered) && !s.gathered[n].hasWait() && cmds+len(s.gathered[n].cmds) <= maxBatch {
			cmds += len(s.gathered[n].cmds)
			n++
		}
		run := s.gathered[:n:n]
		s.gathered = s.gathered[n:]
		if err := s.submitLocked(run); err != nil {
			s.refused(run, err)
		}
	}
	if len(s.gathered) == 0 {
		s.gathered = nil
		if s.drained != nil {
			close(s.drained)
			s.drained = nil
		}
	}
}

// refused handles gathered messages the queue refused as one batch (a bad
// or freed buffer in one of them): each is tried alone, so only the bad one
// fails, and a failed one still completes in its turn.
func (s *GPU) refused(run []*encode, err error) {
	for _, m := range run {
		if len(run) > 1 {
			err = s.submitLocked([]*encode{m})
		}
		if err == nil {
			continue
		}
		s.finish(m, fmt.Errorf("streams: %s: submit: %w", s.name, err))
		seq := m.seq
		if s.q.Submit(nil, func(error) { s.complete(seq); s.batchDone() }) == nil {
			s.inflight++
		} else {
			s.complete(seq) // the queue runs nothing more: nothing is left to wait for
		}
	}
}

// Last returns an Event for everything enqueued so far.
func (s *GPU) Last() Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Event{s: s, seq: s.nextSeq}
}

// Close stops accepting commands, lets what was gathered reach the queue
// and closes the queue, bounded by ctx. Commands that cannot run complete
// with errors; waiters on unfinished events get ErrClosed.
func (s *GPU) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		var drained chan struct{}
		if len(s.gathered) > 0 {
			s.drained = make(chan struct{})
			drained = s.drained
		}
		s.mu.Unlock()
		if drained != nil {
			select {
			case <-drained:
			case <-ctx.Done():
			}
		}
		err := s.q.Close(ctx)
		s.mu.Lock()
		left := s.gathered
		s.gathered = nil
		s.mu.Unlock()
		for _, m := range left {
			s.finish(m, fmt.Errorf("streams: %s: %w", s.name, ErrClosed))
		}
		if err != nil {
			s.closeErr = fmt.Errorf("streams: close %s: close queue: %w", s.name, err)
		}
		close(s.dead)
	})
	return s.closeErr
}

// complete records that everything up to seq has completed and wakes waiters.
func (s *GPU) complete(seq uint64) {
	for {
		cur := s.completed.Load()
		if cur >= seq {
			return
		}
		if s.completed.CompareAndSwap(cur, seq) {
			break
		}
	}
	if s.parked.Load() == 0 {
		return // nobody to wake: a waiter counts itself in before it looks
	}
	ch := make(chan struct{})
	old := s.progress.Swap(&ch)
	close(*old)
}
