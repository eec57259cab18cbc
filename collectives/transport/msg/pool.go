package msg

import (
	"sync"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Recycling, so that the critical path allocates nothing in the steady
// state. A recycled object is one nothing refers to any more: an op once
// its Recv returned, a tag queue once it left p.queues, an eager message
// once its bytes were copied into its Recv's buffer or dropped. Per peer
// free lists hold what one burst of messages used, and a recycled eager
// message keeps a buffer of at most keptData bytes.
const (
	freeQueues = 8
	freeMsgs   = 8
	keptData   = 16 << 10
)

var ops = sync.Pool{New: func() any {
	r := &op{done: make(chan error, 1), job: make(chan *inMsg, 1)}
	r.ready = func() bool { return len(r.done) > 0 || len(r.job) > 0 }
	return r
}}

func getOp(buf []byte, tag transport.Tag, lane int) *op {
	r := ops.Get().(*op)
	r.buf, r.tag, r.lane, r.state = buf, tag, lane, opPosted
	return r
}

func putOp(r *op) {
	if len(r.done) > 0 || len(r.job) > 0 {
		return // not drained: let it go
	}
	r.buf, r.m, r.stop, r.busy = nil, nil, nil, false
	r.halt.Store(false)
	r.waiting.Store(false)
	ops.Put(r)
}

// newQueue is an empty tag queue, a recycled one where p has one. p.mu
// is held, here and below.
func (p *Peer) newQueue() *tagQ {
	if n := len(p.freeQ); n > 0 {
		q := p.freeQ[n-1]
		p.freeQ[n-1] = nil
		p.freeQ = p.freeQ[:n-1]
		return q
	}
	return &tagQ{}
}

func (p *Peer) dropQueue(tag transport.Tag, q *tagQ) {
	if p.queues[tag] == q {
		delete(p.queues, tag)
	}
	clear(q.arrived)
	clear(q.posted)
	q.arrived, q.posted, q.active = q.arrived[:0], q.posted[:0], nil
	if len(p.freeQ) < freeQueues {
		p.freeQ = append(p.freeQ, q)
	}
}

func (p *Peer) newEager(tag transport.Tag, n int, cost int64) *inMsg {
	var m *inMsg
	if k := len(p.freeM); k > 0 {
		m = p.freeM[k-1]
		p.freeM[k-1] = nil
		p.freeM = p.freeM[:k-1]
	} else {
		m = &inMsg{}
	}
	m.tag, m.eager, m.size, m.cost = tag, true, n, cost
	return m
}

func (p *Peer) putEager(m *inMsg) {
	if len(p.freeM) >= freeMsgs {
		return
	}
	data := m.data
	if cap(data) > keptData {
		data = nil
	}
	*m = inMsg{data: data[:0]}
	p.freeM = append(p.freeM, m)
}

// pop takes the first of s, keeping the slice's capacity (queues are
// short).
func pop[T any](s *[]T) T {
	x := (*s)[0]
	n := copy(*s, (*s)[1:])
	var zero T
	(*s)[n] = zero
	*s = (*s)[:n]
	return x
}
