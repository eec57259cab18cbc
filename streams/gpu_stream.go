package streams

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/gpu"
)

// GPU is the handle of a GPU stream: one in-order queue on one device. The
// actor behind it is the backend's queue itself (gpu.Queue: its FIFO and
// its worker own the order and run each batch), and GPU is the thin sender
// that numbers what it sends: Enqueue submits straight to the queue, under
// the stream's lock, so the sequence numbers Events wait on follow the
// queue's order. (A protoactor mailbox in front of the queue added a
// goroutine hand-off to every command and a second FIFO before the
// queue's own, and bought nothing the queue does not do.)
//
// Enqueue is safe for concurrent use; the commands of one caller run in
// the order that caller enqueued them, and all commands run in the order in
// which their Enqueue calls returned (R12). Close stops accepting commands
// and closes the queue; afterwards Enqueue returns ErrClosed.
type GPU struct {
	name string
	dev  gpu.Device
	q    gpu.Queue
	log  *zap.Logger

	mu      sync.Mutex // orders submission with nextSeq; guards closed
	nextSeq uint64
	closed  bool

	completed atomic.Uint64                 // highest sequence number completed
	progress  atomic.Pointer[chan struct{}] // closed and replaced at a completion someone parks for
	parked    atomic.Int32                  // waiters parked on progress
	dead      chan struct{}                 // closed when the stream has shut down
	closeOnce sync.Once
	closeErr  error
}

// encode is one Enqueue: its commands, its done callback and its sequence
// number. The callback runs at most once; a panic in it is the caller's bug,
// logged and recovered, so the stream goes on.
type encode struct {
	done func(error)
	seq  uint64
	s    *GPU
}

// finish runs the callback, then marks the message complete.
func (e *encode) finish(err error) {
	if e.done != nil {
		func() {
			defer func() {
				if r := recover(); r != nil {
					e.s.log.Error("done callback of a GPU stream command panicked; recovered",
						zap.String("stream", e.s.name), zap.Uint64("seq", e.seq), zap.Any("panic", r), zap.Stack("stack"))
				}
			}()
			e.done(err)
		}()
	}
	e.s.complete(e.seq)
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

// Enqueue validates cmds and submits them to the queue without waiting
// (R13). done, if not nil, is called once when they have completed or
// failed, from the backend's completion goroutine: it must not block. If
// Enqueue returns an error, nothing was enqueued and done is not called.
// The returned Event completes after the commands (and everything enqueued
// before them) have. One Enqueue is one batch: a command that fails skips
// the rest of its own commands only and fails only its own done; later
// commands on the stream still run.
func (s *GPU) Enqueue(cmds []gpu.Command, done func(error)) (ev Event, err error) {
	if err := gpu.ValidateBatch(cmds); err != nil {
		return Event{}, fmt.Errorf("streams: %s: enqueue: %w", s.name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Event{}, fmt.Errorf("streams: %s: enqueue: %w", s.name, ErrClosed)
	}
	m := &encode{done: done, seq: s.nextSeq + 1, s: s}
	// A panic while submitting is a backend bug: it fails this call, the
	// stream goes on (R14).
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("streams: %s: submit: %w: %v", s.name, ErrPanic, r)
		}
	}()
	if err := s.q.Submit(cmds, m.finish); err != nil {
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

// Close stops accepting commands and closes the device queue, bounded by
// ctx. Commands that cannot run complete with errors; waiters on
// unfinished events get ErrClosed.
func (s *GPU) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		if err := s.q.Close(ctx); err != nil {
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
