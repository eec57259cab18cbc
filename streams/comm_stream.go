package streams

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/gpu"
)

// Comm is the handle of a communication stream: a CPU actor that runs tasks
// one at a time, in submission order. Each rank owns its own Comm;
// ranks never share one. A task's error, or a panic inside it (caught by
// supervision), reaches the task's done callback; the stream then runs
// the next task. Close cancels the running task's context, fails the tasks
// still queued with ErrClosed, and stops the actor.
type Comm struct {
	host
	ctx       context.Context // canceled when the stream closes
	cancel    context.CancelFunc
	closeOnce sync.Once
	closeErr  error
	ran       atomic.Uint64
	submitted atomic.Uint64
}

// Task is a unit of CPU work on a Comm. Run gets a context that is canceled
// when the stream closes; it must return when that happens. Done (may be
// nil) gets Run's error, an error wrapping ErrPanic, or one wrapping
// ErrClosed if the task never ran; it is called exactly once.
type Task struct {
	Name string
	Run  func(ctx context.Context) error
	Done func(error)
}

// commTask is the actor message carrying one task.
type commTask struct {
	Task
	once sync.Once
}

func (t *commTask) finish(err error) {
	t.once.Do(func() {
		if t.Done != nil {
			t.Done(err)
		}
	})
}

func (t *commTask) fail(err error) { t.finish(fmt.Errorf("task %s: %w", t.Name, err)) }

var commStreamCount atomic.Uint64

// NewComm starts a communication stream actor. The runtime closes it when it
// closes.
func NewComm(rt *actors.Runtime, name string) (*Comm, error) {
	c, err := startComm(rt, name)
	if err != nil {
		return nil, err
	}
	if err := rt.Adopt(c.name, c); err != nil {
		_ = c.Close(context.Background())
		return nil, fmt.Errorf("streams: new comm stream: %w", err)
	}
	return c, nil
}

// startComm starts a communication stream actor that nothing closes yet.
func startComm(rt *actors.Runtime, name string) (*Comm, error) {
	if rt == nil {
		return nil, fmt.Errorf("streams: new comm stream: nil runtime: %w", gpu.ErrBadArgument)
	}
	c := &Comm{}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	name = fmt.Sprintf("comm-%s-%d", name, commStreamCount.Add(1))
	if err := c.spawn(rt, name, func() actor.Actor { return (*commActor)(c) }); err != nil {
		c.cancel()
		return nil, err
	}
	return c, nil
}

// defaultCommKey names the default comm stream among a runtime's services.
var defaultCommKey = &actors.ServiceKey{Name: "default comm stream"}

// DefaultComm is the runtime's default communication stream, started on
// first use and closed with the runtime.
func DefaultComm(rt *actors.Runtime) (*Comm, error) {
	if rt == nil {
		return nil, fmt.Errorf("streams: default comm stream: nil runtime: %w", gpu.ErrBadArgument)
	}
	return actors.Service(rt, defaultCommKey, func(rt *actors.Runtime) (*Comm, error) { return startComm(rt, "default") })
}

// Name is the stream's actor name.
func (c *Comm) Name() string { return c.name }

// Ran counts the tasks that have finished running (successfully or not).
func (c *Comm) Ran() uint64 { return c.ran.Load() }

// Pending counts the tasks submitted and not yet finished.
func (c *Comm) Pending() int { return int(c.submitted.Load() - c.ran.Load()) }

// Submit queues a task without waiting. It fails with ErrClosed once
// the stream is closing; then t.Done is not called.
func (c *Comm) Submit(t Task) error {
	if t.Run == nil {
		return fmt.Errorf("streams: %s: submit %q: nil Run", c.name, t.Name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.postLocked(&commTask{Task: t}); err != nil {
		return fmt.Errorf("streams: %s: submit %q: %w", c.name, t.Name, err)
	}
	c.submitted.Add(1)
	return nil
}

// Close cancels the running task, fails queued tasks with ErrClosed and
// waits (bounded by ctx) until the actor has gone through its mailbox.
func (c *Comm) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.cancel() // the running task returns; queued ones fail with ErrClosed
		err := c.drain(ctx)
		if serr := c.stop(ctx); err == nil {
			err = serr
		}
		if err != nil {
			c.closeErr = fmt.Errorf("streams: close %s: %w", c.name, err)
		}
	})
	return c.closeErr
}

// commActor is the actor behind a Comm: it runs each task inside Receive,
// so tasks never overlap. A panic escapes to panicStrategy, which fails the
// task and resumes the actor.
type commActor Comm

// Receive implements actor.Actor.
func (a *commActor) Receive(ctx actor.Context) {
	c := (*Comm)(a)
	switch m := ctx.Message().(type) {
	case *commTask:
		defer c.ran.Add(1)
		if c.ctx.Err() != nil {
			m.fail(ErrClosed)
			return
		}
		err := m.Run(c.ctx)
		if err != nil {
			err = fmt.Errorf("task %s: %w", m.Name, err)
		}
		m.finish(err)
	case drained:
		close(m)
	case *actor.Stopped:
		close(c.stopped)
	}
}
