package streams

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/choreo-gpu/choreo/actors"
	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/gpu"
)

// maxBatch bounds how many commands the actor gathers into one device batch.
const maxBatch = 512

// GPU is the handle of a GPU stream actor: one in-order queue on one
// device. Enqueue is safe for concurrent use; the commands of one caller run
// in the order that caller enqueued them, and all commands run in the order
// in which their Enqueue calls returned (R12). Close drains and stops the
// actor, then closes the queue; afterwards Enqueue returns ErrClosed.
type GPU struct {
	host
	dev gpu.Device
	q   gpu.Queue
	log *zap.Logger

	nextSeq uint64 // under host.mu, so sequence numbers follow mailbox order

	completed atomic.Uint64                 // highest sequence number completed
	progress  atomic.Pointer[chan struct{}] // closed and replaced at each completion
	dead      chan struct{}                 // closed when the stream has shut down
	closeOnce sync.Once
	closeErr  error

	batchMu sync.Mutex // guards pending (filled in Receive, flushed at mailbox empty)
	pending []*encode
}

// encode is the actor message carrying one caller's commands. Its done
// callback runs at most once, whichever path ends it; a panic in it is the
// caller's bug, logged and recovered, so the stream and the other callbacks
// of its batch go on.
type encode struct {
	cmds []gpu.Command
	done func(error)
	seq  uint64
	once sync.Once
	log  *zap.Logger
}

func (e *encode) finish(err error) {
	e.once.Do(func() {
		if e.done != nil {
			defer func() {
				if r := recover(); r != nil {
					e.log.Error("done callback of a GPU stream command panicked; recovered",
						zap.Uint64("seq", e.seq), zap.Any("panic", r), zap.Stack("stack"))
				}
			}()
			e.done(err)
		}
	})
}

func (e *encode) fail(err error) { e.finish(err) }

var gpuStreamCount atomic.Uint64

// NewGPU starts a GPU stream actor with a new queue on dev. The runtime
// closes the stream when it closes.
func NewGPU(rt *actors.Runtime, dev gpu.Device) (*GPU, error) {
	if rt == nil || dev == nil {
		return nil, fmt.Errorf("streams: new gpu stream: nil runtime or device: %w", gpu.ErrBadArgument)
	}
	q, err := dev.NewQueue()
	if err != nil {
		return nil, fmt.Errorf("streams: new gpu stream: %w", err)
	}
	s := &GPU{dev: dev, q: q, log: rt.Logger(), dead: make(chan struct{})}
	ch := make(chan struct{})
	s.progress.Store(&ch)
	name := fmt.Sprintf("gpu-%s-%d", dev.Properties().Backend, gpuStreamCount.Add(1))
	if err := s.spawn(rt, name, func() actor.Actor { return (*gpuActor)(s) },
		actor.WithMailbox(actor.Unbounded(flusher{s}))); err != nil {
		_ = q.Close(context.Background())
		return nil, err
	}
	if err := rt.Adopt(s.name, s); err != nil {
		_ = s.Close(context.Background())
		return nil, fmt.Errorf("streams: new gpu stream: %w", err)
	}
	return s, nil
}

// Name is the stream's actor name.
func (s *GPU) Name() string { return s.name }

// Device is the device the stream runs on.
func (s *GPU) Device() gpu.Device { return s.dev }

// Enqueue validates cmds and sends them to the stream actor without waiting
// (R13). done, if not nil, is called once when they have completed or
// failed, from the backend's completion goroutine: it must not block. The
// returned Event completes after the commands (and everything enqueued
// before them) have. One Enqueue's commands are a unit: a command that
// fails skips the rest of its own commands only, and fails only its own
// done; later commands on the stream still run (gpu.Queue.SubmitUnits).
func (s *GPU) Enqueue(cmds []gpu.Command, done func(error)) (Event, error) {
	if err := gpu.ValidateBatch(cmds); err != nil {
		return Event{}, fmt.Errorf("streams: %s: enqueue: %w", s.name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &encode{cmds: cmds, done: done, seq: s.nextSeq + 1, log: s.log}
	if err := s.postLocked(m); err != nil {
		return Event{}, fmt.Errorf("streams: %s: enqueue: %w", s.name, err)
	}
	s.nextSeq++
	return Event{s: s, seq: m.seq}, nil
}

// Last returns an Event for everything enqueued so far.
func (s *GPU) Last() Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Event{s: s, seq: s.nextSeq}
}

// Close stops accepting commands, lets the actor flush what it holds, and
// closes the device queue, all bounded by ctx. Commands that cannot run
// complete with errors; waiters on unfinished events get ErrClosed.
func (s *GPU) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		var errs []error
		if err := s.drain(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := s.stop(ctx); err != nil {
			errs = append(errs, err)
		}
		s.flush() // anything the actor gathered but had not submitted
		if err := s.q.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close queue: %w", err))
		}
		close(s.dead)
		if len(errs) > 0 {
			s.closeErr = fmt.Errorf("streams: close %s: %w", s.name, errors.Join(errs...))
		}
	})
	return s.closeErr
}

// complete records that everything up to seq has completed and wakes waiters.
func (s *GPU) complete(seq uint64) {
	for {
		cur := s.completed.Load()
		if cur >= seq || s.completed.CompareAndSwap(cur, seq) {
			break
		}
	}
	ch := make(chan struct{})
	old := s.progress.Swap(&ch)
	close(*old)
}

// flush submits the gathered messages as one device batch.
func (s *GPU) flush() {
	s.batchMu.Lock()
	defer s.batchMu.Unlock()
	s.flushLocked()
}

// flushLocked is flush with batchMu held. Each message is a unit of the
// device batch, so a failed command fails only its own message.
func (s *GPU) flushLocked() {
	if len(s.pending) == 0 {
		return
	}
	msgs := s.pending
	s.pending = nil
	n := 0
	for _, m := range msgs {
		n += len(m.cmds)
	}
	cmds := make([]gpu.Command, 0, n)
	ends := make([]int, 0, len(msgs))
	units := make([]int, len(msgs)) // message -> unit; -1: no commands
	for i, m := range msgs {
		units[i] = -1
		if len(m.cmds) > 0 {
			cmds = append(cmds, m.cmds...)
			ends = append(ends, len(cmds))
			units[i] = len(ends) - 1
		}
	}
	last := msgs[len(msgs)-1].seq
	done := func(err error) {
		for i, m := range msgs {
			m.finish(gpu.UnitErr(err, units[i]))
		}
		s.complete(last)
	}
	// A panic while submitting (a backend bug) must not lose the batch's
	// callbacks: fail every message of it and carry on (R14).
	defer func() {
		if r := recover(); r != nil {
			done(fmt.Errorf("streams: %s: submit: %w: %v", s.name, ErrPanic, r))
		}
	}()
	err := s.q.SubmitUnits(cmds, ends, done)
	if err != nil && len(msgs) > 1 {
		// Refused as a whole (a bad or freed buffer in one message): submit
		// the messages one by one, so only the bad one fails.
		for _, m := range msgs {
			if err := s.q.Submit(m.cmds, m.finish); err != nil {
				m.finish(fmt.Errorf("streams: %s: submit: %w", s.name, err))
			}
		}
		s.completeAfter(last)
		return
	}
	if err != nil {
		done(fmt.Errorf("streams: %s: submit: %w", s.name, err))
	}
}

// completeAfter marks everything up to seq complete once the queue has
// run all it was given so far.
func (s *GPU) completeAfter(seq uint64) {
	if err := s.q.Submit(nil, func(error) { s.complete(seq) }); err != nil {
		s.complete(seq) // closed: nothing more will run
	}
}

// gpuActor is the actor behind a GPU stream. Its Receive gathers commands;
// the mailbox's empty notification (flusher) submits them, so a burst of
// small commands becomes one device batch. A batch reports completion as a
// whole, so a GPU-side wait always starts a new batch: the commands before
// it are never held back from reporting by a wait that comes after them.
type gpuActor GPU

// Receive implements actor.Actor.
func (a *gpuActor) Receive(c actor.Context) {
	s := (*GPU)(a)
	m, ok := c.Message().(*encode)
	if !ok {
		switch m := c.Message().(type) {
		case drained:
			s.flush()
			close(m)
		case *actor.Stopped:
			close(s.stopped)
		}
		return
	}
	s.batchMu.Lock()
	defer s.batchMu.Unlock()
	if len(s.pending) > 0 && startsWait(m.cmds) {
		// A wait may block its batch: start a new one, so that what came
		// before it completes (and is reported) on its own.
		s.flushLocked()
	}
	s.pending = append(s.pending, m)
	if len(s.pending) >= maxBatch || hasWaitAfterHead(m.cmds) {
		s.flushLocked()
	}
}

// startsWait reports whether cmds contains a GPU-side wait.
func startsWait(cmds []gpu.Command) bool {
	for _, c := range cmds {
		if _, ok := c.(gpu.WaitValue); ok {
			return true
		}
	}
	return false
}

// hasWaitAfterHead reports whether a wait follows the first command: then
// commands after the message must not join its batch either.
func hasWaitAfterHead(cmds []gpu.Command) bool { return len(cmds) > 1 && startsWait(cmds[1:]) }

// flusher is the GPU stream mailbox's middleware: when the mailbox runs
// empty it submits what the actor gathered.
type flusher struct{ s *GPU }

func (f flusher) MailboxStarted()             {}
func (f flusher) MessagePosted(interface{})   {}
func (f flusher) MessageReceived(interface{}) {}
func (f flusher) MailboxEmpty()               { f.s.flush() }
