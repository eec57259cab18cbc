package msg

import (
	"errors"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Abort fails the collective (tag.Group, tag.Seq) on every rank: this
// rank's operations at once, the peers' when it reaches them on their
// links.
func (e *Endpoint) Abort(tag transport.Tag, cause error) {
	if cause == nil {
		cause = errors.New("no cause given")
	}
	if e.closed.Load() {
		return
	}
	now := time.Now().UnixNano()
	a := &transport.AbortError{Origin: e.cfg.Rank, Group: tag.Group, Seq: tag.Seq, Cause: cause}
	if !e.aborts.Record(a, now, true) {
		return
	}
	e.sweep(tag, a)
	for _, p := range e.peers {
		if p != nil && !p.down.Load() {
			p.link.Abort(a, now)
		}
	}
}

// sweep fails every operation of tag's collective with a and drops the
// messages held for it.
func (e *Endpoint) sweep(tag transport.Tag, a error) {
	same := func(x transport.Tag) bool { return x.Group == tag.Group && x.Seq == tag.Seq }
	for _, p := range e.peers {
		if p == nil {
			continue
		}
		p.mu.Lock()
		for tg, q := range p.queues {
			if same(tg) {
				p.sweepQueue(tg, q, a)
			}
		}
		for id, s := range p.sends {
			if same(s.tag) {
				s.failWith(p, a)
				if !s.offered {
					delete(p.sends, id) // one offered by address waits for its answer
				}
			}
		}
		p.mu.Unlock()
	}
}

// sweepQueue fails tag's Recvs with a and drops its messages (an active
// one stays matched until its last chunk or its retraction). p.mu is held.
func (p *Peer) sweepQueue(tag transport.Tag, q *tagQ, a error) {
	p.failPosted(q, a)
	for _, m := range q.arrived {
		if m.eager {
			p.consumed(m.cost)
		} else {
			p.rts--
		}
	}
	if q.active != nil && q.active.op != nil {
		p.end(q.active.op, a)
	}
	p.dropQueue(tag, q)
}
