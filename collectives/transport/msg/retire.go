package msg

import (
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Retire implements transport.Retirer: this rank's pending Sends and
// Recvs of group fail with an error wrapping transport.ErrStale, and so
// do its later ones; the group's messages that arrived and wait for a
// Recv are dropped (an eager one's window bytes go back to its sender),
// and so are those that arrive later. A peer's announced message of the
// group, held or arriving later, is refused: the peer is sent an abort of
// its collective whose cause wraps transport.ErrStale, which fails its
// Send. A message already streaming into a Recv that Retire fails is
// read to its end and dropped. The last transport.RetireMemory retired
// groups are remembered.
func (e *Endpoint) Retire(group uint64) {
	if !e.retired.Add(group) {
		return
	}
	stale := transport.StaleError(group)
	for _, p := range e.peers {
		if p == nil {
			continue
		}
		p.mu.Lock()
		refuse := p.retireLocked(group, stale)
		lost := p.lost != nil
		p.mu.Unlock()
		if !lost {
			for _, tag := range refuse {
				p.refuse(tag)
			}
		}
	}
}

// retireLocked fails p's operations of group with stale and drops the
// group's messages; it returns the tags of the announced messages dropped,
// one per collective, for their senders to be refused. p.mu is held.
func (p *Peer) retireLocked(group uint64, stale error) (refuse []transport.Tag) {
	for tag, q := range p.queues {
		if tag.Group != group {
			continue
		}
		for _, m := range q.arrived {
			if !m.eager {
				refuse = appendColl(refuse, tag)
				break
			}
		}
		p.sweepQueue(tag, q, stale)
	}
	for id, s := range p.sends {
		if s.tag.Group == group {
			s.failWith(p, stale)
			if !s.offered {
				delete(p.sends, id) // one offered by address waits for its answer
			}
		}
	}
	return refuse
}

// appendColl appends tag's collective to tags unless it is there.
func appendColl(tags []transport.Tag, tag transport.Tag) []transport.Tag {
	c := tag.Collective()
	for _, t := range tags {
		if t == c {
			return tags
		}
	}
	return append(tags, c)
}

// refuse tells p that this rank refuses its messages of tag's retired
// group: an abort of tag's collective, from this rank, whose cause wraps
// transport.ErrStale. The caller holds no lock of p.
func (p *Peer) refuse(tag transport.Tag) {
	e := p.e
	cause := transport.RemoteCause(transport.CauseStale,
		fmt.Sprintf("%v: rank %d retired group %d", transport.ErrStale, e.cfg.Rank, tag.Group))
	p.link.Abort(&transport.AbortError{Origin: e.cfg.Rank, Group: tag.Group, Seq: tag.Seq, Cause: cause},
		time.Now().UnixNano())
}
