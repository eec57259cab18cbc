package cluster

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/errs"
	"github.com/choreo-gpu/choreo/wire"
)

// rejoiner is the collectives.Rejoiner of the groups Join makes: a
// member's side of growing the group back. It asks rank 0 (through its
// Node) with the address of a data plane it prepared for the grown group,
// and when rank 0 answers with a roster, it links that data plane to every
// rank and makes the grown group, as Join does.
type rejoiner struct {
	rt   *actors.Runtime
	node *Node
	cfg  JoinConfig
	pt   time.Duration
	opts []collectives.Option // the caller's options, for every grown group

	mu    sync.Mutex // one ask at a time
	spare *readied   // the carriers of the next growth, once prepared
}

// Rejoin implements collectives.Rejoiner.
func (r *rejoiner) Rejoin(ctx context.Context, s collectives.Standing) (*collectives.Group, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	where := fmt.Sprintf("cluster: grow rank %d at epoch %d", r.cfg.Rank, s.Epoch)
	if r.spare == nil {
		host, _, _ := net.SplitHostPort(r.node.Control())
		spare, err := prepareCarriers(host, r.cfg.asked())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		r.spare = spare
	}
	members := make([]uint32, len(s.Members))
	for i, m := range s.Members {
		members[i] = uint32(m)
	}
	ans, err := r.node.grow(ctx, &wire.GrowAsk{Rank: uint32(r.cfg.Rank), Epoch: s.Epoch, Ask: s.Ask,
		Members: members, DataAddr: r.spare.addr()})
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", where, err)
	case ans.GetRefused() != "":
		return nil, fmt.Errorf("%s: rank 0 refused: %s: %w", where, ans.GetRefused(), errs.ErrMismatch)
	case ans.GetRoster() == nil:
		return nil, nil
	}
	roster, err := rosterOf(ans.GetRoster(), r.cfg.Size)
	if err != nil {
		return nil, fmt.Errorf("%s: bad roster from rank 0: %s: %w", where, err, errs.ErrMismatch)
	}
	carriers := r.spare
	r.spare = nil
	opts := append(r.opts[:len(r.opts):len(r.opts)], collectives.WithName(s.Base))
	g, err := r.cfg.form(ctx, r.rt, r.node, carriers, roster, r.pt, nil, r, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return g, nil
}

// close releases the carriers prepared for a growth that did not come.
func (r *rejoiner) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spare != nil {
		r.spare.close()
		r.spare = nil
	}
}

// growWait is a member's ask waiting for rank 0's answer.
type growWait struct {
	key   askKey
	reply chan growReply // buffered: one answer
}

// growReply is rank 0's answer to an ask, or why none can come.
type growReply struct {
	ans *wire.GrowAnswer
	err error
}

// grow sends ask to rank 0's Node, again every helloEvery (rank 0 answers
// a repeated ask with its decision), until rank 0 answers, ctx ends, rank
// 0 is lost or the Node closes or fails.
func (n *Node) grow(ctx context.Context, ask *wire.GrowAsk) (*wire.GrowAnswer, error) {
	w := &growWait{key: askKey{ask.GetEpoch(), ask.GetAsk()}, reply: make(chan growReply, 1)}
	n.mu.Lock()
	switch {
	case n.closed:
		n.mu.Unlock()
		return nil, fmt.Errorf("the rank's node is closed: %w", errs.ErrClosed)
	case n.failed != nil:
		n.mu.Unlock()
		return nil, n.failed
	}
	n.growing = w
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		if n.growing == w {
			n.growing = nil
		}
		n.mu.Unlock()
	}()
	root, coord := n.rt.ActorSystem().Root, actor.NewPID(n.spec.Coordinator, Name)
	again := time.NewTicker(helloEvery)
	defer again.Stop()
	for {
		root.RequestWithCustomSender(coord, ask, n.pid)
		select {
		case r := <-w.reply:
			return r.ans, r.err
		case <-again.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("no answer from rank 0 at %s: %w", n.spec.Coordinator, transport.CtxError(ctx))
		}
	}
}

// endGrow fails the ask waiting, if any, with err.
func (n *Node) endGrow(err error) {
	n.mu.Lock()
	w := n.growing
	n.growing = nil
	n.mu.Unlock()
	if w != nil {
		select {
		case w.reply <- growReply{err: err}:
		default:
		}
	}
}

// grown hands rank 0's answer to the ask waiting for it; an answer from
// another sender, or for no ask waiting (a repeat), is dropped.
func (a *nodeActor) grown(c actor.Context, m *wire.GrowAnswer) {
	s := c.Sender()
	if s == nil || s.GetId() != Name || s.GetAddress() != a.n.spec.Coordinator {
		a.log.Warn("ignored a grow answer", zap.Stringer("sender", s))
		return
	}
	a.n.mu.Lock()
	w := a.n.growing
	a.n.mu.Unlock()
	if w == nil || w.key != (askKey{m.GetEpoch(), m.GetAsk()}) {
		return
	}
	select {
	case w.reply <- growReply{ans: m}:
	default:
	}
}
