package choreotest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// Probe is an actor that records every user message it receives, in
// arrival order, so a test can check what an actor sent: give the actor
// the Probe's PID, then read the messages back with Next or Expect, both
// bounded by a context. Lifecycle messages (Started, Stopping, Stopped,
// Restarting) are not recorded; *actor.Terminated of an actor the Probe
// watches is. Each Probe is its own actor: any number may live on any
// number of actor systems. Methods are safe for concurrent use.
type Probe struct {
	name    string
	sys     *actor.ActorSystem
	pid     *actor.PID
	stopped chan struct{}

	mu      sync.Mutex
	msgs    []Envelope
	next    int           // the first message Next has not returned
	arrived chan struct{} // closed and replaced when a message arrives
}

// Envelope is one recorded message and its sender (nil when it was sent
// without one).
type Envelope struct {
	Message any
	Sender  *actor.PID
}

// watchReq asks the probe actor to watch an actor; ack is closed once it does.
type watchReq struct {
	pid *actor.PID
	ack chan struct{}
}

// NewProbe spawns a Probe on sys (a runtime's rt.ActorSystem()). name
// prefixes its actor name, which is made unique.
func NewProbe(sys *actor.ActorSystem, name string) (*Probe, error) {
	if sys == nil {
		return nil, fmt.Errorf("choreotest: new probe %q: nil actor system", name)
	}
	p := &Probe{name: name, sys: sys, stopped: make(chan struct{}), arrived: make(chan struct{})}
	props := actor.PropsFromFunc(p.receive)
	pid, err := sys.Root.SpawnNamed(props, "probe-"+name+"-"+sys.ProcessRegistry.NextId())
	if err != nil {
		return nil, fmt.Errorf("choreotest: new probe %q: %w", name, err)
	}
	p.pid = pid
	return p, nil
}

func (p *Probe) receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Restarting:
	case *actor.Stopped:
		close(p.stopped)
	case watchReq:
		c.Watch(m.pid)
		close(m.ack)
	default:
		p.mu.Lock()
		p.msgs = append(p.msgs, Envelope{Message: m, Sender: c.Sender()})
		close(p.arrived)
		p.arrived = make(chan struct{})
		p.mu.Unlock()
	}
}

// PID is the Probe's actor: the address to give the actor under test.
func (p *Probe) PID() *actor.PID { return p.pid }

// Send sends msg to target with no sender.
func (p *Probe) Send(target *actor.PID, msg any) { p.sys.Root.Send(target, msg) }

// Request sends msg to target with the Probe as its sender, so that the
// target's reply (c.Respond) is recorded by the Probe.
func (p *Probe) Request(target *actor.PID, msg any) {
	p.sys.Root.RequestWithCustomSender(target, msg, p.pid)
}

// Watch makes the Probe watch target and returns once it does (bounded by
// ctx): when target stops, the Probe records an *actor.Terminated.
func (p *Probe) Watch(ctx context.Context, target *actor.PID) error {
	ack := make(chan struct{})
	p.sys.Root.Send(p.pid, watchReq{target, ack})
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("choreotest: probe %s: watch %s: %w", p.name, target, ctx.Err())
	}
}

// NextEnvelope returns the oldest message Next has not yet returned, with
// its sender, waiting for one (bounded by ctx).
func (p *Probe) NextEnvelope(ctx context.Context) (Envelope, error) {
	for {
		p.mu.Lock()
		if p.next < len(p.msgs) {
			e := p.msgs[p.next]
			p.next++
			p.mu.Unlock()
			return e, nil
		}
		ch, n := p.arrived, p.next
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Envelope{}, fmt.Errorf("choreotest: probe %s: no message %d: %w", p.name, n+1, ctx.Err())
		}
	}
}

// Next returns the oldest message not yet returned, waiting for one
// (bounded by ctx).
func (p *Probe) Next(ctx context.Context) (any, error) {
	e, err := p.NextEnvelope(ctx)
	return e.Message, err
}

// NextAs returns p's next message, which must be a T.
func NextAs[T any](ctx context.Context, p *Probe) (T, error) {
	var zero T
	m, err := p.Next(ctx)
	if err != nil {
		return zero, err
	}
	v, ok := m.(T)
	if !ok {
		return zero, fmt.Errorf("choreotest: probe %s: got %T %+v, want a %T", p.name, m, m, zero)
	}
	return v, nil
}

// Expect takes the next len(want) messages (bounded by ctx) and checks
// that each equals its want (reflect.DeepEqual). The error shows the first
// message that differs, want against got.
func (p *Probe) Expect(ctx context.Context, want ...any) error {
	for i, w := range want {
		got, err := p.Next(ctx)
		if err != nil {
			return fmt.Errorf("choreotest: probe %s: expect %d messages, got %d: %w", p.name, len(want), i, err)
		}
		if !reflect.DeepEqual(got, w) {
			return fmt.Errorf("choreotest: probe %s: message %d of %d:\n  want %T %+v\n  got  %T %+v",
				p.name, i+1, len(want), w, w, got, got)
		}
	}
	return nil
}

// Pending counts the messages recorded and not yet returned by Next.
func (p *Probe) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.msgs) - p.next
}

// Received returns every message recorded so far, returned by Next or not.
func (p *Probe) Received() []Envelope {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.msgs)
}

// Close stops the Probe's actor and waits (bounded by ctx) until it has
// stopped. The record stays readable. Closing an actor system stops its
// probes too.
func (p *Probe) Close(ctx context.Context) error {
	p.sys.Root.Stop(p.pid)
	select {
	case <-p.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("choreotest: probe %s: close: %w", p.name, ctx.Err())
	}
}
