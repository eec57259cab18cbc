package cluster

import (
	"fmt"
	"math/rand/v2"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/internal/errs"
	"github.com/choreo-gpu/choreo/wire"
)

// Local messages to a Node's actor.
type (
	// watchPeers starts watching roster's other ranks.
	watchPeers struct {
		roster Roster
		onLost func(rank int, cause error)
	}
	// leave tells the watched peers this rank leaves.
	leave struct{ reason string }
	// askMissing asks rank 0's actor which ranks never said hello; the
	// answer goes to reply (buffered).
	askMissing struct{ reply chan<- []int }
)

// nodeActor owns a Node's state: on rank 0 the rendezvous (gather, the
// roster once made), on every rank the peers it watches and why those that
// left said they did.
type nodeActor struct {
	n   *Node
	log *zap.Logger

	gather *gather      // rank 0 only
	done   *wire.Roster // rank 0: the roster, once every rank said hello
	ended  bool         // the rendezvous's result was delivered

	watched map[string]int // a peer Node's PID (Address/Id) -> its rank
	left    map[int]string // a peer's Leave reason
	lost    map[int]bool
	onLost  func(rank int, cause error)
}

func (a *nodeActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *wire.Hello:
		a.hello(c, m)
	case *wire.Roster:
		a.roster(m)
	case *wire.Refused:
		a.finish(result{err: refusal(m.GetReason())})
	case *wire.Ping:
		if c.Sender() != nil {
			c.Respond(&wire.Pong{Nonce: m.GetNonce(), Rank: uint32(a.n.spec.Rank)})
		}
	case *wire.Leave:
		if a.left == nil {
			a.left = map[int]string{}
		}
		a.left[int(m.GetRank())] = m.GetReason()
	case watchPeers:
		a.watch(c, m)
	case *actor.Terminated:
		a.terminated(m)
	case leave:
		for key := range a.watched {
			c.Send(pidOf(key), &wire.Leave{Rank: uint32(a.n.spec.Rank), Reason: m.reason})
		}
	case askMissing:
		a.answerMissing(m.reply)
	}
}

// refusal is the error of a refused hello. Every refusal is a
// disagreement across ranks (another world size, run or version, or two
// processes claiming one rank): ErrMismatch.
func refusal(reason string) error {
	return fmt.Errorf("refused by rank 0: %s: %w", reason, errs.ErrMismatch)
}

// hello handles a rank's hello on rank 0.
func (a *nodeActor) hello(c actor.Context, h *wire.Hello) {
	from := actor.NewPID(h.GetControlAddr(), Name)
	if a.gather == nil {
		c.Send(from, &wire.Refused{Rank: h.GetRank(), Reason: fmt.Sprintf("rank %d does not host the rendezvous", a.n.spec.Rank)})
		return
	}
	if err := a.gather.add(h); err != nil {
		a.log.Warn("hello refused", zap.Uint32("rank", h.GetRank()), zap.String("from", h.GetControlAddr()), zap.Error(err))
		c.Send(from, &wire.Refused{Rank: h.GetRank(), Reason: err.Error()})
		return
	}
	switch {
	case a.done != nil: // a repeated hello after the roster went out
		if h.GetRank() != 0 {
			c.Send(from, a.done)
		}
	case a.gather.complete():
		a.done = a.gather.roster(rand.Uint64()>>2 | 1<<61) // apart from Local's and Split's ids
		for _, addr := range a.gather.controls() {
			c.Send(actor.NewPID(addr, Name), a.done)
		}
		a.roster(a.done)
	case h.GetRank() != 0:
		c.Send(from, a.gather.roster(0))
	}
}

// roster handles rank 0's answer: a partial one (group 0) is progress.
func (a *nodeActor) roster(w *wire.Roster) {
	if w.GetGroup() == 0 {
		a.n.progress.Store(w)
		return
	}
	r, err := rosterOf(w, a.n.spec.Size)
	if err == nil && r.Members[a.n.spec.Rank].Control != a.n.control {
		err = fmt.Errorf("roster gives rank %d to %s, not to this node (%s)", a.n.spec.Rank, r.Members[a.n.spec.Rank].Control, a.n.control)
	}
	if err != nil {
		err = fmt.Errorf("bad roster from rank 0: %s: %w", err, errs.ErrMismatch)
	}
	a.finish(result{roster: r, err: err})
}

// finish delivers the rendezvous's result once.
func (a *nodeActor) finish(r result) {
	if a.ended {
		return
	}
	a.ended = true
	a.n.final <- r
}

// watch starts watching every other rank's Node.
func (a *nodeActor) watch(c actor.Context, m watchPeers) {
	a.onLost = m.onLost
	a.watched = map[string]int{}
	a.lost = map[int]bool{}
	for _, p := range m.roster.Members {
		if p.Rank == a.n.spec.Rank {
			continue
		}
		pid := actor.NewPID(p.Control, Name)
		a.watched[keyOf(pid)] = p.Rank
		c.Watch(pid)
	}
}

// terminated reports a watched peer lost, once.
func (a *nodeActor) terminated(m *actor.Terminated) {
	rank, ok := a.watched[keyOf(m.GetWho())]
	if !ok || a.lost[rank] {
		return
	}
	a.lost[rank] = true
	cause := fmt.Errorf("control plane: rank %d's node at %s is gone (%s)", rank, m.GetWho().GetAddress(), m.GetWhy())
	if why, ok := a.left[rank]; ok {
		cause = fmt.Errorf("%w; it left: %s", cause, why)
	}
	a.log.Info("peer lost", zap.Int("rank", rank), zap.Error(cause))
	if a.onLost != nil {
		a.onLost(rank, cause)
	}
}

// answerMissing tells reply the ranks that never said hello.
func (a *nodeActor) answerMissing(reply chan<- []int) {
	var m []int
	if a.gather != nil {
		m = a.gather.missing()
	}
	reply <- m
}

// keyOf names a PID by address and id.
func keyOf(p *actor.PID) string { return p.GetAddress() + "/" + p.GetId() }

// pidOf is keyOf's inverse.
func pidOf(key string) *actor.PID {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '/' {
			return actor.NewPID(key[:i], key[i+1:])
		}
	}
	return nil
}
