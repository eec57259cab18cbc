package msg

import (
	"fmt"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// tagQ matches one tag's messages from one peer with its Recvs, in order.
// active is the message being received into a Recv's buffer; while it is
// set, later messages wait.
type tagQ struct {
	arrived []*inMsg
	posted  []*op
	active  *inMsg
}

// inMsg is a message from a peer: eager (its bytes are in data, or going
// straight into op's buffer) or announced (its bytes come in chunks once
// answered Go, or are read by address).
type inMsg struct {
	tag    transport.Tag
	eager  bool
	data   []byte
	size   int
	cost   int64  // eager: window bytes
	id     uint64 // announced
	lane   int    // announced: the lane it came on (its answer's)
	addr   uint64 // announced: offered for a single-copy read at addr (0: not)
	got    int    // bytes received so far
	held   bool   // a Hold of lane waits for its chunks
	single bool   // read by address on its Recv's goroutine
	op     *op    // the Recv receiving it, nil once that Recv ended
	sink   Sink   // its current frame's (one frame of a message at a time)
}

func (m *inMsg) sinkOf(p *Peer, kind, off, end int) *Sink {
	m.sink = Sink{p: p, m: m, kind: kind, off: off, end: end}
	return &m.sink
}

// unhold ends m's Hold of its lane, once. p.mu is held (as it is in all
// the functions below).
func (m *inMsg) unhold(p *Peer, delivered bool) {
	if m.held {
		m.held = false
		p.link.Release(m.lane, delivered)
	}
}

// Recv operation states.
const (
	opPosted = iota
	opMatched
	opDone
)

// op is a Recv. done receives exactly one value. While busy, a reader
// writes into buf without the lock (between a Sink's Take and Put), or
// the Recv's own goroutine reads its message by address (job); whoever
// ends the op then sets stop (and halt), wakes the lane, and the busy
// side ends it when it is done.
type op struct {
	buf     []byte
	tag     transport.Tag
	lane    int
	done    chan error
	job     chan *inMsg // a message to read by address
	state   int
	busy    bool
	stop    error
	halt    atomic.Bool
	waiting atomic.Bool // in the link's Wait
	m       *inMsg
	ready   func() bool // done or job holds a value (made once per op: ops are recycled)
}

func (p *Peer) queue(tag transport.Tag) *tagQ {
	q := p.queues[tag]
	if q == nil {
		q = p.newQueue()
		p.queues[tag] = q
	}
	return q
}

// tidy drops (and recycles) tag's queue once it holds nothing: the
// caller must not use q after it.
func (p *Peer) tidy(tag transport.Tag, q *tagQ) {
	if len(q.arrived) == 0 && len(q.posted) == 0 && q.active == nil && p.queues[tag] == q {
		p.dropQueue(tag, q)
	}
}

// arrivedLocked reports whether tag's next message from p has arrived
// whole and waits for its Recv, which then succeeds even after p is lost.
func (p *Peer) arrivedLocked(tag transport.Tag) bool {
	q := p.queues[tag]
	return q != nil && q.active == nil && len(q.posted) == 0 && len(q.arrived) > 0 && q.arrived[0].eager
}

// end ends Recv r with err unless it already ended: a posted r leaves its
// queue; a matched r is detached from its message (whose remaining bytes
// are then dropped); a busy r is ended by its busy side. An r that waits
// in the link's Wait and fails is woken there. Once done holds its value
// r is not touched (its Recv may recycle it).
func (p *Peer) end(r *op, err error) {
	if r.state == opDone {
		return
	}
	if r.busy {
		if r.stop == nil {
			r.stop = err
			r.halt.Store(true)
			p.link.Wake(r.lane)
		}
		return
	}
	if r.state == opPosted {
		if q := p.queues[r.tag]; q != nil {
			for i, x := range q.posted {
				if x == r {
					q.posted = append(q.posted[:i], q.posted[i+1:]...)
					break
				}
			}
			p.tidy(r.tag, q)
		}
	}
	if r.m != nil && r.m.op == r {
		r.m.op = nil
	}
	r.state = opDone
	wake, lane := err != nil && r.waiting.Load(), r.lane
	r.done <- err
	if wake {
		p.link.Wake(lane)
	}
}

// failPosted ends queue q's posted Recvs with err, leaving q otherwise as
// it is.
func (p *Peer) failPosted(q *tagQ, err error) {
	for i, r := range q.posted {
		q.posted[i] = nil
		r.state = opMatched // off the queue already: end leaves q alone
		p.end(r, err)
	}
	q.posted = q.posted[:0]
}

// match pairs tag's arrived messages with its posted Recvs, in order.
func (p *Peer) match(tag transport.Tag, q *tagQ) {
	for q.active == nil && len(q.posted) > 0 && len(q.arrived) > 0 {
		m := pop(&q.arrived)
		r := pop(&q.posted)
		r.state = opMatched
		switch {
		case m.eager:
			p.consumed(m.cost)
			if len(r.buf) != m.size {
				p.end(r, sizeErr(m.size, len(r.buf)))
			} else {
				copy(r.buf, m.data)
				p.end(r, nil)
			}
			p.putEager(m)
		case len(r.buf) != m.size:
			p.rts--
			p.link.Answer(m.lane, m.id, SizeMismatch)
			p.end(r, sizeErr(m.size, len(r.buf)))
		default:
			p.start(q, m, r)
		}
	}
	p.tidy(tag, q)
}

// start begins the transfer of announced message m into Recv r: read by
// address on r's goroutine where the link can, else answered Go, its
// chunks awaited on its lane.
func (p *Peer) start(q *tagQ, m *inMsg, r *op) {
	m.op = r
	r.m = m
	q.active = m
	p.matched[m.id] = m
	if m.addr != 0 && m.size > 0 && p.sc != nil {
		m.single = true
		r.busy = true // until its goroutine read it (readSingle)
		r.job <- m
		if r.waiting.Load() {
			p.link.Wake(r.lane)
		}
		return
	}
	m.held = true
	p.link.Hold(m.lane)
	p.link.Answer(m.lane, m.id, Go)
	if m.size == 0 {
		p.complete(m) // no chunk will come
	}
}

// complete ends a message whose bytes have all arrived and returns its
// queue if that may now match more.
func (p *Peer) complete(m *inMsg) *tagQ {
	if r := m.op; r != nil {
		p.end(r, nil)
	}
	if p.matched[m.id] == m {
		delete(p.matched, m.id)
		p.rts--
		m.unhold(p, true)
	}
	if q := p.queues[m.tag]; q != nil && q.active == m {
		q.active = nil
		return q
	}
	return nil
}

// retract drops message id, which its sender withdrew: a queued one
// leaves its queue; a matched one gives its Recv back to the head of the
// queue, to take the next message.
func (p *Peer) retract(id uint64) {
	if m := p.matched[id]; m != nil {
		delete(p.matched, id)
		p.rts--
		m.unhold(p, true)
		q := p.queue(m.tag)
		if r := m.op; r != nil && r.state == opMatched && !r.busy {
			m.op = nil
			r.m = nil
			r.state = opPosted
			q.posted = append([]*op{r}, q.posted...)
		}
		if q.active == m {
			q.active = nil
		}
		p.match(m.tag, q)
		return
	}
	if tag, q, i := p.arrivedRTS(id); q != nil {
		q.arrived = append(q.arrived[:i], q.arrived[i+1:]...)
		p.rts--
		p.tidy(tag, q)
	}
}

func sizeErr(sent, recv int) error {
	return fmt.Errorf("%w: sent %d bytes, receive buffer %d", transport.ErrSizeMismatch, sent, recv)
}

// consumed hands cost bytes of the window back to the peer, in batches of
// a quarter of the window (the heartbeat hands back the rest).
func (p *Peer) consumed(cost int64) {
	p.owed += cost
	if p.owed >= int64(p.e.cfg.MaxBuffered)/4 {
		p.flushCredit()
	}
}

func (p *Peer) flushCredit() {
	if p.owed == 0 || p.lost != nil {
		return
	}
	p.inBuf -= p.owed
	p.link.Consumed(p.owed)
	p.owed = 0
}
