package shm

import (
	"errors"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Abort fails the collective (tag.Group, tag.Seq) on every rank: this
// rank's operations at once, the peers' when the ABORT frame reaches
// their socket reader.
func (t *Transport) Abort(tag transport.Tag, cause error) {
	if cause == nil {
		cause = errors.New("no cause given")
	}
	if t.closed.Load() {
		return
	}
	now := time.Now().UnixNano()
	a := &transport.AbortError{Origin: t.rank, Group: tag.Group, Seq: tag.Seq, Cause: cause}
	if !t.aborts.Record(a, now, true) {
		return
	}
	t.sweep(tag, a)
	text := cause.Error()
	if len(text) > maxAbortText {
		text = text[:maxAbortText]
	}
	b := (&frame{kind: fAbort, group: tag.Group, seq: tag.Seq, id: uint64(now),
		code: uint32(transport.CodeOf(cause)), text: []byte(text)}).bytes()
	for _, p := range t.peers {
		if p != nil && p.sock != nil {
			p.sock.send(b)
		}
	}
}

// remoteAbort applies an ABORT frame from p.
func (t *Transport) remoteAbort(p *peer, f *frame) {
	a := &transport.AbortError{Origin: p.rank, Group: f.group, Seq: f.seq,
		Cause: transport.RemoteCause(transport.CauseCode(f.code), string(f.text))}
	if t.aborts.Record(a, int64(f.id), false) {
		t.sweep(transport.Tag{Group: f.group, Seq: f.seq}, a) // decoded from the wire
	}
}

// sweep fails every operation of tag's collective with a, with every
// peer, and drops the messages held for it.
func (t *Transport) sweep(tag transport.Tag, a error) {
	same := func(x transport.Tag) bool { return x.Group == tag.Group && x.Seq == tag.Seq }
	for _, p := range t.peers {
		if p == nil {
			continue
		}
		p.mu.Lock()
		for tg, q := range p.queues {
			if !same(tg) {
				continue
			}
			for _, r := range q.posted {
				p.end(r, a)
			}
			for _, m := range q.arrived {
				if m.eager {
					p.consumed(m.cost)
					p.buffered -= m.cost
				} else {
					p.rts--
				}
			}
			if q.active != nil && q.active.op != nil {
				p.end(q.active.op, a)
			}
			// An active message stays matched until its last chunk or
			// its retraction arrives.
			delete(p.queues, tg)
		}
		for id, s := range p.sends {
			if same(s.key) {
				s.failWith(a)
				if !s.cma {
					delete(p.sends, id) // one offered by address waits for its answer
				}
			}
		}
		p.mu.Unlock()
	}
}
