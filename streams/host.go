package streams

import (
	"context"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/choreo-gpu/choreo/actors"
)

// host is what both stream actors share: the actor's name and PID, its own
// dispatcher goroutine, and an orderly stop. Sends go through post, under
// mu, so that nothing is posted after drain began; a stream that must
// order something else with its posts (the GPU stream's sequence numbers)
// does it under the same mu with postLocked.
type host struct {
	name    string
	sys     *actor.ActorSystem
	pid     *actor.PID
	disp    *ownDispatcher
	stopped chan struct{} // closed by the actor on *actor.Stopped

	mu     sync.Mutex
	closed bool
}

// spawn starts the actor made by producer under h.name, with the panic
// strategy and h's own dispatcher added to opts.
func (h *host) spawn(rt *actors.Runtime, name string, producer func() actor.Actor, opts ...actor.PropsOption) error {
	h.name, h.sys = name, rt.ActorSystem()
	h.disp, h.stopped = newOwnDispatcher(), make(chan struct{})
	opts = append(opts, actor.WithGuardian(panicStrategy{log: rt.Logger()}), actor.WithDispatcher(h.disp))
	pid, err := h.sys.Root.SpawnNamed(actor.PropsFromProducer(producer, opts...), name)
	if err != nil {
		h.disp.stop()
		return fmt.Errorf("streams: spawn %s: %w", name, err)
	}
	h.pid = pid
	return nil
}

// postLocked sends msg to the actor; h.mu must be held. It fails with
// ErrClosed once drain has begun.
func (h *host) postLocked(msg any) error {
	if h.closed {
		return ErrClosed
	}
	h.sys.Root.Send(h.pid, msg)
	return nil
}

// drain refuses further posts and waits (bounded by ctx) until the actor
// has processed everything posted before: its last message is drained.
func (h *host) drain(ctx context.Context) error {
	ack := make(chan struct{})
	h.mu.Lock()
	h.closed = true
	h.sys.Root.Send(h.pid, drained(ack))
	h.mu.Unlock()
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("drain actor: %w", ctx.Err())
	}
}

// stop stops the actor and waits (bounded by ctx) until it has, then ends
// the dispatcher goroutine.
func (h *host) stop(ctx context.Context) error {
	defer h.disp.stop()
	h.sys.Root.Stop(h.pid)
	select {
	case <-h.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop actor: %w", ctx.Err())
	}
}

// drained is the last message a closing stream sends its actor; the actor
// closes the channel once it has handled everything before it.
type drained chan struct{}
