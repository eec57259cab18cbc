package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/internal/errs"
	"github.com/choreo-gpu/choreo/wire"
)

// A Node's actor is restarted after a panic at most maxRestarts times
// within restartWindow; the next panic within the window fails the Node.
const (
	maxRestarts   = 5
	restartWindow = 10 * time.Second
)

// supervisor is the supervisor strategy of every Node's actor (its
// guardian: the actor is spawned at the root): a panic restarts the actor,
// up to maxRestarts times within restartWindow; past that the actor is
// stopped and its Node fails with an error naming the panic (see
// nodeActor.fail), so that no rank is left without a control plane
// unawares.
//
// At the pinned protoactor version a restart keeps the actor's PID, its
// mailbox (suspended during the restart, then resumed: the messages queued
// are handled after it), the watches it made (they are held by the
// watched side and the remote's endpoint watcher, by PID) and those of its
// watchers; it drops the message whose handling panicked, and makes the
// actor anew from its producer (*actor.Restarting to the old one,
// *actor.Started to the new one). A Node's state lives in the Node, so the
// new actor has all of it; on Started it watches its peers again and
// dials again the suspected ones whose dial was out (the dropped message
// may have been a sign of a peer's loss, or a dial's verdict).
//
// The strategy is stateless (the failures are counted in the actor's own
// restart statistics), so that one guardian serves every Node of an actor
// system.
type supervisor struct{}

var _ actor.SupervisorStrategy = supervisor{}

// nodePanic is a panic of a Node's actor as its supervisor sees it: the
// Node, the value panicked with, and the type of the message being
// handled.
type nodePanic struct {
	node    *Node
	value   any
	message string
}

func (p nodePanic) String() string {
	return fmt.Sprintf("%v (handling a %s)", p.value, p.message)
}

// HandleFailure restarts the failed Node actor, or stops it (failing its
// Node) past maxRestarts restarts within restartWindow.
func (supervisor) HandleFailure(_ *actor.ActorSystem, s actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics,
	reason, _ any) {
	rs.Fail()
	failures := rs.NumberOfFailures(restartWindow)
	p, ours := reason.(nodePanic)
	if failures <= maxRestarts {
		if ours {
			p.node.logger().Warn("node panicked: restarting it", zap.Int("rank", p.node.spec.Rank),
				zap.Stringer("panic", p), zap.Int("failures", failures), zap.Int("max_restarts", maxRestarts),
				zap.Duration("window", restartWindow))
		}
		s.RestartChildren(child)
		return
	}
	if ours {
		err := fmt.Errorf("cluster: rank %d: control plane failed: its node panicked %d times within %v, more than the %d restarts allowed (last: %v); this rank leaves its group: %w: %w",
			p.node.spec.Rank, failures, restartWindow, maxRestarts, p, errs.ErrPeerLost, errs.ErrEvicted)
		p.node.broken.Store(&err)
	}
	s.StopChildren(child)
}

// logger is the Node's logger.
func (n *Node) logger() *zap.Logger { return n.rt.Logger().Named("cluster") }

// Err is why the Node failed (its actor panicked more than its supervisor
// allows, see supervisor): an error naming the panic and wrapping
// ErrPeerLost and ErrEvicted; nil while its control plane runs.
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.failed
}

// Restarts is how many times the Node's actor was restarted after a panic.
func (n *Node) Restarts() int { return max(0, int(n.incarnations.Load())-1) }

// caught passes a panic of the actor on to its supervisor as a nodePanic,
// having logged it with its stack (the supervisor sees only the value).
// Deferred by Receive.
func (a *nodeActor) caught(msg any) {
	r := recover()
	if r == nil {
		return
	}
	p := nodePanic{node: a.n, value: r, message: fmt.Sprintf("%T", msg)}
	a.log.Error("node panicked", zap.Int("rank", a.n.spec.Rank), zap.Stringer("panic", p), zap.Stack("stack"))
	panic(p)
}

// reestablish is what a restarted actor does on Started: it watches every
// peer not lost again (a watch of a peer already watched changes nothing;
// one of a peer gone brings a new sign of it, in case the message the
// panic dropped was one), and dials again each suspected peer whose dial
// was out (its verdict may have been that message).
func (a *nodeActor) reestablish(c actor.Context) {
	rewatched, redialed := 0, 0
	for key, rank := range a.watched {
		if _, lost := a.lost[rank]; !lost {
			c.Watch(pidOf(key))
			rewatched++
		}
	}
	self, root := c.Self(), a.n.rt.ActorSystem().Root
	for rank, d := range a.doubt {
		if _, lost := a.lost[rank]; lost || !d.dialing {
			continue
		}
		redialed++
		go func() { root.Send(self, dialed{rank: rank, gone: gone(context.Background(), rank, d.addr)}) }()
	}
	a.log.Info("node restarted after a panic: its state kept, its peers watched again", zap.Int("rank", a.n.spec.Rank),
		zap.Int("restarts", a.n.Restarts()), zap.Int("rewatched", rewatched), zap.Int("redialed", redialed),
		zap.Int("lost", len(a.lost)))
}

// stopping handles the actor's stop: when its supervisor stopped it, the
// Node fails.
func (a *nodeActor) stopping(c actor.Context) {
	if err := a.n.broken.Load(); err != nil {
		a.fail(c, *err)
	}
}

// fail ends the Node for err: the rendezvous, if still waiting, fails
// with it; the peers are told this rank leaves (its reason is err); every
// peer not lost yet is reported lost with err through Watch's callback
// (also when the actor had not handled watchPeers yet); the probes stop.
// It runs while the actor stops and never panics (a panic there would
// leave the actor neither running nor stopped).
func (a *nodeActor) fail(c actor.Context, err error) {
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("failing the node panicked", zap.Int("rank", a.n.spec.Rank), zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	self := a.n.spec.Rank
	a.log.Error("control plane failed: this rank leaves its group", zap.Int("rank", self), zap.Error(err))
	a.finish(result{err: err})
	bye := &wire.Leave{Rank: uint32(self), Reason: err.Error()}
	switch {
	case a.formed.Members != nil:
		for _, p := range a.formed.Members {
			if p.Rank != self {
				c.Request(actor.NewPID(p.Control, Name), bye)
			}
		}
	case a.gather != nil: // rank 0 before the roster: the ranks that came
		for _, addr := range a.gather.controls() {
			c.Request(actor.NewPID(addr, Name), bye)
		}
	}
	a.n.mu.Lock()
	a.n.failed = err
	if a.n.onLost != nil {
		a.onLost = a.n.onLost
		a.reportAll(a.formed, self, err)
	}
	a.n.mu.Unlock()
	a.n.StopProbes()
	a.n.endGrow(err)
}
