package shm

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// tagQ matches one tag's messages from one peer with its Recvs, in order.
// active is the rendezvous message being received into a Recv's buffer;
// while it is set, later messages wait.
type tagQ struct {
	arrived []*inMsg
	posted  []*op
	active  *inMsg
}

// inMsg is a message from a peer: eager (its bytes are in data) or
// announced by an RTS (its bytes come in chunks once its CTS went out).
type inMsg struct {
	tag   transport.Tag
	eager bool
	data  []byte
	size  int
	cost  int64  // eager: window bytes
	id    uint64 // rendezvous
	got   int    // rendezvous: bytes received so far
	op    *op    // the Recv receiving it, nil once that Recv ended
	cma   bool   // offered by address (at addr in the sender), read by its Recv
	addr  uint64
}

// Recv operation states.
const (
	opPosted = iota
	opMatched
	opDone
)

// op is a Recv. done receives exactly one value. While busy, the pump
// goroutine copies a slot into buf without the lock; whoever ends the op
// then sets stop, and the pump ends it after that copy.
//
// A message offered by address is handed to the Recv's goroutine (job),
// busy from the match: that goroutine reads it (see receiveCMA), looking
// at halt between pieces.
type op struct {
	buf   []byte
	tag   transport.Tag
	done  chan error
	job   chan *inMsg
	state int
	busy  bool
	halt  atomic.Bool
	stop  error
	m     *inMsg
}

// Recv receives the message sent by rank src under tag into into.
func (t *Transport) Recv(ctx context.Context, src int, tag transport.Tag, into []byte) error {
	return t.wrap(src, "recv", tag, t.recv(ctx, src, tag, into))
}

func (t *Transport) recv(ctx context.Context, src int, tag transport.Tag, into []byte) error {
	p, err := t.peerOf(src)
	if err != nil {
		return err
	}
	if err := transport.CtxError(ctx); err != nil {
		return err
	}
	t.enter()
	defer t.exit()
	p.live.RLock()
	defer p.live.RUnlock()
	r := &op{buf: into, tag: tag, done: make(chan error, 1), job: make(chan *inMsg, 1), state: opPosted}
	p.mu.Lock()
	if err := p.checkLocked(tag); err != nil && (err != p.lost || !p.arrivedLocked(tag)) {
		p.mu.Unlock()
		return err
	}
	q := p.queue(tag)
	q.posted = append(q.posted, r)
	p.match(tag, q)
	p.mu.Unlock()

	// The message is often microseconds away: poll for it before parking
	// where processors are to spare (see poll).
	start := time.Now()
	waited := false
	if p.poll(func() bool { return len(r.done) > 0 || len(r.job) > 0 }) {
		p.t.poll.Waited(time.Since(start))
		waited = true
		if len(r.done) > 0 {
			return <-r.done
		}
	}
	rc := recheck{p: p}
	defer rc.stop()
	cancel := ctx.Done()
	for {
		select {
		case err := <-r.done:
			if !waited {
				p.t.poll.Waited(time.Since(start))
			}
			return err
		case m := <-r.job:
			if !waited {
				p.t.poll.Waited(time.Since(start))
				waited = true
			}
			p.receiveCMA(r, m)
		case <-cancel:
			// The Recv ends; a read handed to it still runs (it sees
			// the stop and reads nothing more).
			cancel, waited = nil, true
			p.mu.Lock()
			p.end(r, transport.CtxError(ctx))
			p.mu.Unlock()
		case <-rc.C():
			rc.fire()
		}
	}
}

// arrivedLocked reports whether tag's next message from p has arrived
// whole and waits for its Recv: such a Recv succeeds even after p is
// lost. p.mu is held.
func (p *peer) arrivedLocked(tag transport.Tag) bool {
	q := p.queues[tag]
	return q != nil && q.active == nil && len(q.posted) == 0 && len(q.arrived) > 0 && q.arrived[0].eager
}

func (p *peer) queue(tag transport.Tag) *tagQ {
	q := p.queues[tag]
	if q == nil {
		q = &tagQ{}
		p.queues[tag] = q
	}
	return q
}

// tidy drops tag's queue once it holds nothing.
func (p *peer) tidy(tag transport.Tag, q *tagQ) {
	if len(q.arrived) == 0 && len(q.posted) == 0 && q.active == nil && p.queues[tag] == q {
		delete(p.queues, tag)
	}
}

// end ends Recv r with err unless it already ended: a posted r leaves its
// queue; a matched r is detached from its message (whose remaining bytes
// are then dropped); a busy r is ended by the pump after its copy. p.mu
// is held.
func (p *peer) end(r *op, err error) {
	if r.state == opDone {
		return
	}
	if r.busy {
		if r.stop == nil {
			r.stop = err
		}
		r.halt.Store(true)
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
	r.done <- err
}

// match pairs tag's arrived messages with its posted Recvs, in order.
// p.mu is held.
func (p *peer) match(tag transport.Tag, q *tagQ) {
	for q.active == nil && len(q.posted) > 0 && len(q.arrived) > 0 {
		m := q.arrived[0]
		q.arrived[0] = nil
		q.arrived = q.arrived[1:]
		r := q.posted[0]
		q.posted[0] = nil
		q.posted = q.posted[1:]
		r.state = opMatched
		if m.eager {
			p.consumed(m.cost)
			p.buffered -= m.cost
			if len(r.buf) != m.size {
				p.end(r, sizeErr(m.size, len(r.buf)))
				continue
			}
			copy(r.buf, m.data)
			p.end(r, nil)
			continue
		}
		if len(r.buf) != m.size {
			p.rts--
			p.clear(m.id, ctlCTSSize)
			p.end(r, sizeErr(m.size, len(r.buf)))
			continue
		}
		m.op = r
		r.m = m
		q.active = m
		p.matched[m.id] = m
		if m.cma && m.size > 0 && p.cmaPID != 0 {
			r.busy = true // until its goroutine read it (receiveCMA)
			r.job <- m
			continue
		}
		m.cma = false // through the slots
		p.clear(m.id, ctlCTS)
		if m.size == 0 {
			p.complete(m) // no chunk will come
		}
	}
	p.tidy(tag, q)
}

// complete ends a rendezvous message whose bytes have all arrived and
// returns its queue if that may now match more. p.mu is held.
func (p *peer) complete(m *inMsg) *tagQ {
	if r := m.op; r != nil {
		p.end(r, nil)
	}
	if p.matched[m.id] == m {
		delete(p.matched, m.id)
		p.rts--
	}
	if q := p.queues[m.tag]; q != nil && q.active == m {
		q.active = nil
		return q
	}
	return nil
}

func sizeErr(sent, recv int) error {
	return fmt.Errorf("%w: sent %d bytes, receive buffer %d", transport.ErrSizeMismatch, sent, recv)
}

// consumed hands cost bytes of the eager window back to the peer.
// p.mu is held; the region is mapped while p.lost is nil (see unmap).
func (p *peer) consumed(cost int64) {
	if p.lost == nil {
		p.in.freed.Add(uint64(cost))
	}
}

// clear tells the peer's send of message id that its Recv is posted
// (ctlCTS) or has another size (ctlCTSSize): through out's control ring,
// or the socket when that ring is full. p.mu is held; the region is
// mapped while p.lost is nil (see unmap).
func (p *peer) clear(id uint64, kind uint32) {
	if p.lost != nil {
		return
	}
	p.cmu.Lock()
	l := p.out
	h := l.ctlHead.Load()
	if h-l.ctlTail.Load() < ctlEntries {
		putCtl(l.ctl(h), kind, id)
		l.ctlHead.Store(h + 1)
		p.cmu.Unlock()
		p.notify()
		return
	}
	p.cmu.Unlock()
	f := frame{kind: fCTS, id: id}
	switch kind {
	case ctlCTSSize:
		f.flags = 1
	case ctlDone:
		f.flags = 2
	}
	p.sock.send(f.bytes())
}

// cleared hands a clear-to-send to the send waiting for it, if any.
func (p *peer) cleared(id uint64, kind uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sends[id]; s != nil {
		select {
		case s.cts <- kind:
		default:
		}
	}
}

// failAllLocked ends every operation with p with err. Eager messages that
// arrived whole stay receivable (what a peer sent before it went is
// delivered); the rest of what is held is dropped. p.mu is held.
func (p *peer) failAllLocked(err error) {
	for tag, q := range p.queues {
		for _, r := range q.posted {
			p.end(r, err)
		}
		if q.active != nil && q.active.op != nil {
			p.end(q.active.op, err)
		}
		kept := q.arrived[:0]
		for _, m := range q.arrived {
			if m.eager {
				kept = append(kept, m)
			}
		}
		clear(q.arrived[len(kept):])
		if len(kept) == 0 {
			delete(p.queues, tag)
			continue
		}
		*q = tagQ{arrived: kept}
	}
	for id, s := range p.sends {
		s.failWith(err)
		delete(p.sends, id)
	}
	clear(p.matched)
	p.rts = 0
}

// retract withdraws rendezvous message id, which its sender gave up: a
// matched one gives its Recv back to the queue's head. p.mu is held.
func (p *peer) retract(id uint64) {
	if m := p.matched[id]; m != nil {
		delete(p.matched, id)
		p.rts--
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
	for tag, q := range p.queues {
		for i, m := range q.arrived {
			if !m.eager && m.id == id {
				q.arrived = append(q.arrived[:i], q.arrived[i+1:]...)
				p.rts--
				p.tidy(tag, q)
				return
			}
		}
	}
}
