package msg

import (
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Eager takes an eager message of n bytes under tag: its payload goes
// into the returned Sink. It fails when the message overruns this rank's
// window (MaxBuffered per peer, each message costing n+Overhead).
func (p *Peer) Eager(tag transport.Tag, n int) (*Sink, error) {
	cost := int64(n) + Overhead
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost != nil || n < 0 {
		return &discard, nil
	}
	if p.inBuf+cost > int64(p.e.cfg.MaxBuffered) {
		return nil, fmt.Errorf("an eager message of %d bytes overruns the window (%d of %d bytes in use)",
			n, p.inBuf, p.e.cfg.MaxBuffered)
	}
	p.inBuf += cost
	if p.e.retired.Has(tag.Group) || p.e.aborts.Of(tag) != nil {
		p.consumed(cost)
		return &discard, nil
	}
	q := p.queues[tag]
	if q == nil || q.active != nil || len(q.arrived) > 0 || len(q.posted) == 0 {
		m := p.newEager(tag, n, cost)
		if cap(m.data) >= n {
			m.data = m.data[:n]
		} else {
			m.data = make([]byte, n)
		}
		return m.sinkOf(p, sinkBuf, 0, n), nil
	}
	// A Recv waits: the bytes go straight into its buffer.
	r := pop(&q.posted)
	r.state = opMatched
	if len(r.buf) != n {
		p.consumed(cost)
		p.end(r, sizeErr(n, len(r.buf)))
		p.tidy(tag, q)
		return &discard, nil
	}
	m := p.newEager(tag, n, cost)
	m.op = r
	r.m = m
	q.active = m
	return m.sinkOf(p, sinkMsg, 0, n), nil
}

// Announced takes the announce of message id of size bytes under tag,
// which came on lane; addr is where the sender offers it for a
// single-copy read (0: not offered). One of a retired group is refused
// (see Endpoint.Retire).
func (p *Peer) Announced(lane int, tag transport.Tag, id, size, addr uint64) error {
	p.mu.Lock()
	refuse, err := p.announced(lane, tag, id, size, addr)
	p.mu.Unlock()
	if refuse {
		p.refuse(tag)
	}
	return err
}

// announced is Announced under p.mu; refuse: the announce is of a retired
// group.
func (p *Peer) announced(lane int, tag transport.Tag, id, size, addr uint64) (refuse bool, err error) {
	p.maxID = max(p.maxID, id)
	if p.lost != nil {
		return false, nil
	}
	if p.e.retired.Has(tag.Group) {
		return true, nil
	}
	if p.e.aborts.Of(tag) != nil {
		return false, nil
	}
	// The sender holds at most MaxRTS; its retractions and aborts reach
	// this rank a little after it reuses their turns.
	if p.rts >= 4*p.lim.MaxRTS {
		return false, fmt.Errorf("more than %d messages announced", 4*p.lim.MaxRTS)
	}
	if size > 1<<62 || (addr != 0 && addr+size < addr) {
		return false, fmt.Errorf("a message of %d bytes announced at %#x", size, addr)
	}
	p.rts++
	q := p.queue(tag)
	q.arrived = append(q.arrived, &inMsg{tag: tag, size: int(size), id: id, lane: lane, addr: addr})
	p.match(tag, q)
	return false, nil
}

// Chunk takes n bytes of message id at offset off: its payload goes into
// the returned Sink. A chunk of a message this rank no longer holds (its
// sender's retraction overtook it) is dropped; one of a message never
// announced, or at another offset than the next, breaks the protocol.
func (p *Peer) Chunk(id, off uint64, n int) (*Sink, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost != nil {
		return &discard, nil
	}
	m := p.matched[id]
	if m == nil || m.single {
		if id <= p.maxID && m == nil {
			return &discard, nil
		}
		return nil, fmt.Errorf("unexpected chunk of message %d at offset %d (%d bytes)", id, off, n)
	}
	if n < 0 || off != uint64(m.got) || off+uint64(n) > uint64(m.size) {
		return nil, fmt.Errorf("chunk of message %d at offset %d (%d bytes), want offset %d of %d",
			id, off, n, m.got, m.size)
	}
	return m.sinkOf(p, sinkMsg, int(off), int(off)+n), nil
}

// Answered takes the peer's answer to message id, which this rank
// announced. An answer to a message no Send waits for any more is
// dropped: a Send that gives up after its announce retracts it.
func (p *Peer) Answered(id uint64, a Answer) {
	p.mu.Lock()
	s := p.sends[id]
	p.mu.Unlock()
	if s == nil {
		return
	}
	select {
	case s.answer <- a:
	default:
	}
}

// Retracted takes the peer's withdrawal of message id; with ack the peer
// waits for an Answer Done once nothing reads the message any more. A
// retraction of a message this rank does not hold is ignored (links
// deliver a retraction after its announce).
func (p *Peer) Retracted(id uint64, ack bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost != nil {
		return nil
	}
	m := p.matched[id]
	if m != nil && m.single {
		return nil // its read ends, then answers Done
	}
	if m == nil && ack {
		if _, q, i := p.arrivedRTS(id); q != nil {
			m = q.arrived[i]
		}
	}
	lane := 0 // a message no longer held: the first lane
	if m != nil {
		lane = m.lane
	}
	p.retract(id)
	if ack {
		p.link.Answer(lane, id, Done)
	}
	return nil
}

// arrivedRTS finds announced message id among those waiting for a Recv:
// q.arrived[i] (q nil: none). p.mu is held.
func (p *Peer) arrivedRTS(id uint64) (transport.Tag, *tagQ, int) {
	for tag, q := range p.queues {
		for i, m := range q.arrived {
			if !m.eager && m.id == id {
				return tag, q, i
			}
		}
	}
	return transport.Tag{}, nil, 0
}

// Aborted takes the peer's abort of collective (group, seq), made at Unix
// nanoseconds at, and its cause; or its eviction notice, which evicts
// this rank.
func (p *Peer) Aborted(group, seq uint64, at int64, code transport.CauseCode, text string) {
	if isNotice(group, seq, code) {
		p.e.evictedBy(p.rank, text)
		return
	}
	a := &transport.AbortError{Origin: p.rank, Group: group, Seq: seq,
		Cause: transport.RemoteCause(code, text)}
	if p.e.aborts.Record(a, at, false) {
		p.e.sweep(transport.Tag{Group: group, Seq: seq}, a)
	}
}
