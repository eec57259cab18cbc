package cluster

import (
	"fmt"
	"math/rand/v2"
	"time"

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
	// askMissing asks rank 0's actor which ranks are missing; the answer
	// goes to reply (buffered).
	askMissing struct{ reply chan<- absence }
	// absence is rank 0's missing ranks: those that never said hello, and
	// those that did and whose control connection then ended.
	absence struct{ never, left []int }
	// endpointGone: the runtime's control connection to addr ended (or a
	// connect to it failed).
	endpointGone struct{ addr string }
	// coordinatorGone: goneGrace after rank 0's connection ended before
	// the roster.
	coordinatorGone struct{ addr string }
	// peerRefused: a probe found no process at the rank's control address.
	peerRefused struct {
		rank  int
		cause error
	}
	// giveUp: rank 0's rendezvous failed; the ranks that came are told.
	giveUp struct {
		reason  string
		timeout bool
	}
)

// nodeState is a Node's control-plane state: on rank 0 the rendezvous
// (gather, the roster once made), on every rank the roster once known, the
// peers it watches, those lost and why, those reported lost to onLost,
// those suspected (suspect.go), and why those that left said they did. It
// lives in the Node, so that a restart of the Node's actor keeps it; only
// the actor's goroutine touches it (and, once the actor stopped on a
// failure, Watch under Node.mu).
type nodeState struct {
	gather *gather      // rank 0 only
	done   *wire.Roster // rank 0: the roster, once every rank said hello
	ended  bool         // the rendezvous's result was delivered
	formed Roster       // the roster, once it arrived (Members nil before)

	watched  map[string]int // a peer Node's PID (Address/Id) -> its rank
	left     map[int]string // a peer's Leave reason
	lost     map[int]error  // peers lost since the roster, and why
	reported map[int]bool   // peers reported lost to onLost
	doubt    map[int]doubt  // peers that may be gone, being checked (suspect.go)
	onLost   func(rank int, cause error)
	growth   *growth // rank 0: growing the group back (grow.go)
}

// nodeActor is the receiver of a Node's messages: a thin value over the
// Node's state, made anew each time protoactor restarts the actor
// (restarted is set on those), so that a restart loses no state.
type nodeActor struct {
	*nodeState
	n         *Node
	log       *zap.Logger
	restarted bool
}

// Receive handles one message. A panic is logged with its stack and goes on
// to the actor's supervisor (supervise.go), naming the Node; Stopping and
// Stopped end the Node, failing it when its supervisor stopped it.
func (a *nodeActor) Receive(c actor.Context) {
	msg := c.Message()
	switch msg.(type) {
	case *actor.Stopping:
		a.stopping(c)
		return
	case *actor.Stopped:
		return
	}
	defer a.caught(msg)
	if f := a.n.fault.Load(); f != nil {
		(*f)(msg)
	}
	a.receive(c, msg)
}

// receive handles one message but the ends of the actor.
func (a *nodeActor) receive(c actor.Context, msg any) {
	switch m := msg.(type) {
	case *actor.Started:
		if a.restarted {
			a.reestablish(c)
		}
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
	case *wire.Lost:
		a.relayed(c, m)
	case *wire.GrowAsk:
		a.growAsk(c, m)
	case *wire.GrowAnswer:
		a.grown(c, m)
	case endpointGone:
		a.endpointGone(c, m.addr)
	case coordinatorGone:
		a.coordinatorGone(m.addr)
	case giveUp:
		a.giveUp(c, m)
	case peerRefused:
		if a.formed.Members != nil {
			a.lose(c, m.rank, m.cause)
		}
	case *wire.Leave:
		a.leave(c, m)
	case watchPeers:
		a.watch(c, m)
	case *actor.Terminated:
		a.terminated(c, m)
	case dialed:
		a.dialed(c, m)
	case rewatch:
		a.rewatched(c, m)
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
	seen := a.gather.has(h)
	if a.gather.sealed && !seen {
		a.waitToRejoin(c, h, from)
		return
	}
	replaced, err := a.gather.add(h)
	if err != nil {
		a.log.Warn("hello refused", zap.Uint32("peer_rank", h.GetRank()), zap.String("from", h.GetControlAddr()), zap.Error(err))
		c.Send(from, &wire.Refused{Rank: h.GetRank(), Reason: err.Error()})
		return
	}
	switch {
	case replaced:
		a.log.Warn("rendezvous: a new process took a rank from its address", zap.Uint32("peer_rank", h.GetRank()),
			zap.String("from", h.GetControlAddr()), zap.Int32("pid", h.GetPid()))
	case !seen && a.done == nil:
		a.log.Info("rendezvous: hello", zap.Uint32("peer_rank", h.GetRank()), zap.String("from", h.GetControlAddr()),
			zap.Int32("pid", h.GetPid()), zap.Ints("missing", a.gather.missing()))
	}
	switch {
	case a.done != nil: // a repeated hello after the roster went out
		if h.GetRank() != 0 {
			c.Send(from, a.done)
		}
	case a.gather.complete():
		a.done = a.gather.roster(rand.Uint64()>>2 | 1<<61) // apart from Local's and Split's ids
		a.gather.seal()
		for _, addr := range a.gather.controls() {
			c.Send(actor.NewPID(addr, Name), a.done)
		}
		a.log.Info("rendezvous: roster sent", zap.Uint64("group", a.done.GetGroup()), zap.Int("size", a.gather.size))
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
	} else if !a.ended {
		a.formed = r
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

// watch starts watching every other rank's Node, and reports the peers
// lost since the roster. A roster of a grown group (a later epoch)
// replaces the one watched: the Nodes of the processes it no longer names
// are not watched any more, and what was known of a rank whose process
// changed (lost, left, in doubt) is forgotten.
func (a *nodeActor) watch(c actor.Context, m watchPeers) {
	a.onLost = m.onLost
	for key, rank := range a.watched {
		if p := m.roster.Members[rank]; keyOf(actor.NewPID(p.Control, Name)) != key {
			c.Unwatch(pidOf(key))
		}
	}
	if old := a.formed; old.Members != nil {
		for _, p := range m.roster.Members {
			if q := old.Members[p.Rank]; q.Control != p.Control || q.PID != p.PID {
				delete(a.lost, p.Rank)
				delete(a.reported, p.Rank)
				delete(a.doubt, p.Rank)
				delete(a.left, p.Rank)
			}
		}
	}
	a.formed = m.roster
	a.watched = map[string]int{}
	for _, p := range m.roster.Members {
		if p.Rank == a.n.spec.Rank {
			continue
		}
		pid := actor.NewPID(p.Control, Name)
		a.watched[keyOf(pid)] = p.Rank
		c.Watch(pid)
	}
	for rank, cause := range a.lost {
		a.report(rank, cause)
	}
}

// report tells onLost (once set) that rank is lost, once per rank.
func (s *nodeState) report(rank int, cause error) {
	if s.onLost == nil || s.reported[rank] {
		return
	}
	if s.reported == nil {
		s.reported = map[int]bool{}
	}
	s.reported[rank] = true
	s.onLost(rank, cause)
}

// reportAll reports every rank of roster but self lost: with its own cause
// when it was lost before, else with cause.
func (s *nodeState) reportAll(roster Roster, self int, cause error) {
	for _, p := range roster.Members {
		if p.Rank == self {
			continue
		}
		if why, ok := s.lost[p.Rank]; ok {
			s.report(p.Rank, why)
		} else {
			s.report(p.Rank, cause)
		}
	}
}

// terminated handles the end of a watch of a peer's Node. It is a sign,
// not proof (suspect.go): protoactor's remoting reports a Node not found
// on the peer (not started yet) as stopped, and a watch it dropped on
// this side (its first connect to the peer still being retried) as not
// found.
func (a *nodeActor) terminated(c actor.Context, m *actor.Terminated) {
	if rank, ok := a.watched[keyOf(m.GetWho())]; ok {
		a.suspect(c, rank, m.GetWho().GetAddress(),
			fmt.Errorf("control plane: rank %d's node at %s is gone (%s)", rank, m.GetWho().GetAddress(), m.GetWhy()))
	}
}

// endpointGone handles the end of the runtime's control connection to
// addr. Before the roster: rank 0 drops the hello from there (a
// replacement may take the rank); another rank fails its rendezvous when
// it is rank 0's and rank 0 had answered (before that, a failed connect
// is retried by the next hello), with the authentication failure if its
// dial met one. After the roster: the member at addr is lost.
func (a *nodeActor) endpointGone(c actor.Context, addr string) {
	switch {
	case a.formed.Members != nil:
		a.dropJoiner(addr)
		if rank := a.formed.rankAt(addr); rank >= 0 && rank != a.n.spec.Rank {
			a.suspect(c, rank, addr, fmt.Errorf("control plane: rank %d's node at %s is gone (its connection ended)", rank, addr))
		}
	case a.gather != nil:
		if rank, ok := a.gather.drop(addr); ok {
			a.log.Warn("rendezvous: dropped a rank whose control connection ended; a new process may take its rank",
				zap.Int("peer_rank", rank), zap.String("address", addr), zap.Ints("missing", a.gather.missing()))
		}
	case addr == a.n.spec.Coordinator && a.n.progress.Load() != nil && !a.ended:
		self, root := c.Self(), a.n.rt.ActorSystem().Root
		time.AfterFunc(goneGrace, func() { root.Send(self, coordinatorGone{addr: addr}) })
	}
}

// coordinatorGone fails the rendezvous, rank 0 gone, unless it ended
// meanwhile (the roster, or rank 0's word that it gave up, came first).
func (a *nodeActor) coordinatorGone(addr string) {
	if a.ended {
		return
	}
	err := a.n.authFailure()
	if err == nil {
		err = fmt.Errorf("rank 0's control connection at %s ended before the roster: %w", addr, errs.ErrPeerLost)
	}
	a.finish(result{err: err})
}

// giveUp tells the ranks that said hello that rank 0's rendezvous failed.
func (a *nodeActor) giveUp(c actor.Context, m giveUp) {
	a.ended = true
	if a.gather == nil {
		return
	}
	for _, addr := range a.gather.controls() {
		c.Request(actor.NewPID(addr, Name), &wire.Leave{Rank: 0, Reason: m.reason, Timeout: m.timeout})
	}
}

// leave records a peer's Leave; rank 0's before the roster ends this
// rank's rendezvous (ErrTimeout when rank 0's deadline passed, else
// ErrPeerLost).
func (a *nodeActor) leave(c actor.Context, m *wire.Leave) {
	if a.left == nil {
		a.left = map[int]string{}
	}
	a.left[int(m.GetRank())] = m.GetReason()
	s := c.Sender()
	if m.GetRank() != 0 || a.ended || a.n.spec.Rank == 0 || s == nil || s.GetAddress() != a.n.spec.Coordinator || s.GetId() != Name {
		return
	}
	cause := errs.ErrPeerLost
	if m.GetTimeout() {
		cause = errs.ErrTimeout
	}
	a.finish(result{err: fmt.Errorf("rank 0 gave up the rendezvous (%s): %w", m.GetReason(), cause)})
}

// relayed handles rank 0's word that a rank was lost: it counts only from
// rank 0's Node, once the roster is known.
func (a *nodeActor) relayed(c actor.Context, m *wire.Lost) {
	s, rank := c.Sender(), int(m.GetRank())
	if a.formed.Members == nil || a.n.spec.Rank == 0 || s == nil || s.GetId() != Name ||
		s.GetAddress() != a.formed.Members[0].Control || rank >= len(a.formed.Members) || rank == a.n.spec.Rank {
		a.log.Warn("ignored a Lost message", zap.Stringer("sender", s), zap.Uint32("peer_rank", m.GetRank()))
		return
	}
	a.lose(c, rank, fmt.Errorf("control plane: rank 0 reports rank %d lost: %s", rank, m.GetReason()))
}

// lose records rank lost, once: it reports it (when watching), and rank 0
// tells the other ranks.
func (a *nodeActor) lose(c actor.Context, rank int, cause error) {
	if _, ok := a.lost[rank]; ok {
		return
	}
	if a.lost == nil {
		a.lost = map[int]error{}
	}
	if why, ok := a.left[rank]; ok {
		cause = fmt.Errorf("%w; it left: %s", cause, why)
	}
	a.lost[rank] = cause
	a.log.Info("peer lost", zap.Int("peer_rank", rank), zap.Error(cause))
	if rank == 0 {
		a.n.endGrow(fmt.Errorf("rank 0, which decides, is lost: %w", cause))
	}
	if a.n.spec.Rank == 0 {
		for _, p := range a.formed.Members {
			if p.Rank != 0 && p.Rank != rank {
				c.Request(actor.NewPID(p.Control, Name), &wire.Lost{Rank: uint32(rank), Reason: cause.Error()})
			}
		}
	}
	a.report(rank, cause)
}

// answerMissing tells reply the ranks that never said hello.
func (a *nodeActor) answerMissing(reply chan<- absence) {
	var m absence
	if a.gather != nil {
		m.never, m.left = a.gather.absent()
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
