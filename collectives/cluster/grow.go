package cluster

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/choreo-gpu/choreo/wire"
)

// keptAnswers bounds how many of its latest decisions rank 0 keeps, to
// answer a member that asks again (its answer may still be on its way
// while the others have asked the next).
const keptAnswers = 8

// growth is rank 0's side of growing a group back (Group.Grow): the
// processes that wait to take a rank (they said hello after the roster
// went out), the members' asks not decided yet, and the latest decisions.
// It is part of rank 0's nodeState.
type growth struct {
	joiners map[int]*wire.Hello              // by rank: the latest process waiting for it
	asks    map[askKey]map[int]*wire.GrowAsk // by ask, by member rank
	answers map[askKey]*wire.GrowAnswer
	order   []askKey // answers' keys, oldest first
}

// askKey names one ask of a group: the members' n-th ask at an epoch.
type askKey struct{ epoch, ask uint64 }

// growthOf is s's growth, made on first use.
func (s *nodeState) growthOf() *growth {
	if s.growth == nil {
		s.growth = &growth{joiners: map[int]*wire.Hello{}, asks: map[askKey]map[int]*wire.GrowAsk{},
			answers: map[askKey]*wire.GrowAnswer{}}
	}
	return s.growth
}

// waitToRejoin handles, on rank 0 once the roster is out, a hello from a
// process that does not hold its rank: it waits to take that rank when the
// members grow the group back (their GrowAsk), and is told which ranks are
// there meanwhile (a roster of group 0 with their ranks alone: how to
// reach them it learns only with the grown group's roster).
func (a *nodeActor) waitToRejoin(c actor.Context, h *wire.Hello, from *actor.PID) {
	if err := a.gather.check(h); err != nil {
		a.log.Warn("hello refused", zap.Uint32("peer_rank", h.GetRank()), zap.String("from", h.GetControlAddr()), zap.Error(err))
		c.Send(from, &wire.Refused{Rank: h.GetRank(), Reason: err.Error()})
		return
	}
	r := int(h.GetRank())
	if r == 0 {
		c.Send(from, &wire.Refused{Rank: 0, Reason: "rank 0 is held by this node, which hosts the rendezvous"})
		return
	}
	gr := a.growthOf()
	if old := gr.joiners[r]; old == nil || !sameProcess(old, h) {
		a.log.Info("a process waits to take a rank when the group grows back", zap.Int("peer_rank", r),
			zap.String("from", h.GetControlAddr()), zap.Int32("pid", h.GetPid()))
	}
	gr.joiners[r] = h
	progress := &wire.Roster{Version: Version} // the ranks there, nothing of how to reach them
	for _, m := range a.done.GetMembers() {
		progress.Members = append(progress.Members, &wire.Member{Rank: m.GetRank()})
	}
	c.Send(from, progress)
}

// dropJoiner forgets a waiting process whose control connection ended.
func (a *nodeActor) dropJoiner(addr string) {
	if a.growth == nil {
		return
	}
	for r, h := range a.growth.joiners {
		if h.GetControlAddr() == addr {
			delete(a.growth.joiners, r)
			a.log.Warn("a process waiting to take a rank is gone", zap.Int("peer_rank", r), zap.String("address", addr))
		}
	}
}

// growAsk handles, on rank 0, a member's ask to grow its group back: once
// every member of the ask has asked, rank 0 decides for them all (decide);
// an ask decided before is answered again.
func (a *nodeActor) growAsk(c actor.Context, m *wire.GrowAsk) {
	s, r := c.Sender(), int(m.GetRank())
	refuse := func(why string) {
		a.log.Warn("grow ask refused", zap.Int("peer_rank", r), zap.Stringer("sender", s), zap.String("reason", why))
		if s != nil {
			c.Request(s, &wire.GrowAnswer{Epoch: m.GetEpoch(), Ask: m.GetAsk(), Refused: why})
		}
	}
	switch {
	case a.gather == nil || a.done == nil:
		refuse(fmt.Sprintf("rank %d hosts no formed group", a.n.spec.Rank))
		return
	case r >= a.gather.size || s == nil || s.GetId() != Name || a.gather.hellos[r] == nil || s.GetAddress() != a.gather.hellos[r].GetControlAddr():
		refuse(fmt.Sprintf("rank %d is not a member at %s", r, s.GetAddress()))
		return
	case !slices.Contains(m.GetMembers(), uint32(r)):
		refuse(fmt.Sprintf("rank %d asks for members %v, which leave it out", r, m.GetMembers()))
		return
	}
	gr := a.growthOf()
	key := askKey{m.GetEpoch(), m.GetAsk()}
	if ans, ok := gr.answers[key]; ok {
		c.Request(s, ans)
		return
	}
	asks := gr.asks[key]
	if asks == nil {
		asks = map[int]*wire.GrowAsk{}
		gr.asks[key] = asks
	}
	asks[r] = m
	for _, other := range asks {
		if !slices.Equal(other.GetMembers(), m.GetMembers()) {
			delete(gr.asks, key)
			a.answer(c, key, asks, &wire.GrowAnswer{Epoch: key.epoch, Ask: key.ask,
				Refused: fmt.Sprintf("the members disagree on who they are: %v and %v", other.GetMembers(), m.GetMembers())})
			return
		}
	}
	if len(asks) < len(m.GetMembers()) {
		return
	}
	delete(gr.asks, key)
	a.answer(c, key, asks, a.decide(c, key, asks))
}

// decide is the answer to an ask every member made: the roster of the whole
// world at the next epoch when a process waits for every rank the members
// lack (the members with the data addresses their asks give), else none.
func (a *nodeActor) decide(c actor.Context, key askKey, asks map[int]*wire.GrowAsk) *wire.GrowAnswer {
	ans := &wire.GrowAnswer{Epoch: key.epoch, Ask: key.ask}
	gr := a.growth
	var lacking []int
	for r := range a.gather.size {
		if _, member := asks[r]; !member {
			if gr.joiners[r] == nil {
				return ans
			}
			lacking = append(lacking, r)
		}
	}
	if len(lacking) == 0 {
		return ans
	}
	for r, m := range asks {
		h := proto.Clone(a.gather.hellos[r]).(*wire.Hello)
		h.DataAddr = m.GetDataAddr()
		a.gather.hellos[r] = h
	}
	for _, r := range lacking {
		a.gather.hellos[r] = gr.joiners[r]
		delete(gr.joiners, r)
	}
	ans.Roster = a.gather.roster(rand.Uint64()>>2 | 1<<61)
	ans.Roster.Epoch = key.epoch + 1
	a.done = ans.Roster
	a.log.Info("group grows back", zap.Uint64("epoch", key.epoch+1), zap.Uint64("group", ans.Roster.GetGroup()),
		zap.Ints("members", slices.Sorted(maps.Keys(asks))), zap.Ints("rejoining", lacking))
	for _, r := range lacking {
		c.Send(actor.NewPID(a.gather.hellos[r].GetControlAddr(), Name), ans.Roster)
	}
	return ans
}

// answer sends ans to every member that asked, and keeps it for their
// repeated asks.
func (a *nodeActor) answer(c actor.Context, key askKey, asks map[int]*wire.GrowAsk, ans *wire.GrowAnswer) {
	gr := a.growth
	gr.answers[key] = ans
	gr.order = append(gr.order, key)
	if len(gr.order) > keptAnswers {
		delete(gr.answers, gr.order[0])
		gr.order = gr.order[1:]
	}
	for r := range asks {
		c.Request(actor.NewPID(a.gather.hellos[r].GetControlAddr(), Name), ans) // the sender names rank 0
	}
}
