package shm

import (
	"fmt"
	"math"
)

// slot processes one data slot.
func (p *peer) slot(s []byte) error {
	h := getSlotHeader(s)
	if int(h.len) > len(s)-slotHdr {
		return fmt.Errorf("slot of %d bytes in slots of %d", h.len, len(s)-slotHdr)
	}
	if h.size > math.MaxInt {
		return fmt.Errorf("message of %d bytes", h.size)
	}
	payload := s[slotHdr : slotHdr+int(h.len)]
	switch h.kind {
	case slotEager:
		if h.size != uint64(h.len) {
			return fmt.Errorf("eager message of %d bytes in a slot of %d", h.size, h.len)
		}
		return p.eagerIn(h, payload)
	case slotRTS:
		if h.len != 0 {
			return fmt.Errorf("RTS with %d bytes", h.len)
		}
		return p.rtsIn(h, false)
	case slotRTSCMA:
		if h.len != 0 {
			return fmt.Errorf("RTS with %d bytes", h.len)
		}
		if h.size == 0 || h.off == 0 || h.off+h.size < h.off || h.off+h.size > maxUserAddr {
			return fmt.Errorf("message of %d bytes offered at %#x", h.size, h.off)
		}
		return p.rtsIn(h, true)
	case slotChunk:
		return p.chunkIn(h, payload)
	}
	return fmt.Errorf("slot of kind %d", h.kind)
}

// eagerIn delivers an eager message: into the Recv waiting for it, else
// into a copy held until its Recv comes.
func (p *peer) eagerIn(h slotHeader, payload []byte) error {
	cost := int64(h.len) + msgOverhead
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost != nil {
		return nil
	}
	if p.t.aborts.Of(h.tag) != nil {
		p.consumed(cost)
		return nil
	}
	q := p.queue(h.tag)
	if q.active == nil && len(q.arrived) == 0 && len(q.posted) > 0 {
		r := q.posted[0]
		q.posted[0] = nil
		q.posted = q.posted[1:]
		r.state = opMatched
		p.consumed(cost)
		if len(r.buf) != len(payload) {
			p.end(r, sizeErr(len(payload), len(r.buf)))
		} else {
			copy(r.buf, payload)
			p.end(r, nil)
		}
		p.tidy(h.tag, q)
		return nil
	}
	if p.buffered+cost > int64(p.t.cfg.MaxBuffered) {
		return fmt.Errorf("eager messages over the window of %d bytes", p.t.cfg.MaxBuffered)
	}
	p.buffered += cost
	q.arrived = append(q.arrived, &inMsg{tag: h.tag, eager: true, data: append([]byte(nil), payload...), size: len(payload), cost: cost})
	return nil
}

// rtsIn queues an announced message and matches it.
func (p *peer) rtsIn(h slotHeader, cma bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h.id <= p.rtsSeen {
		return fmt.Errorf("RTS id %d after %d", h.id, p.rtsSeen)
	}
	p.rtsSeen = h.id
	if p.early[h.id] {
		delete(p.early, h.id)
		return nil
	}
	if p.lost != nil || p.t.aborts.Of(h.tag) != nil {
		return nil
	}
	if p.rts >= 4*maxRTS {
		return fmt.Errorf("over %d messages announced", 4*maxRTS)
	}
	p.rts++
	q := p.queue(h.tag)
	m := &inMsg{tag: h.tag, id: h.id, size: int(h.size)}
	if cma {
		m.cma, m.addr = true, h.off
	}
	q.arrived = append(q.arrived, m)
	p.match(h.tag, q)
	return nil
}

// chunkIn copies a chunk into its Recv's buffer, outside the lock (the
// Recv cannot return meanwhile: it is busy), and completes its message.
// Chunks of a message whose Recv ended, or which was retracted or
// aborted, are dropped.
func (p *peer) chunkIn(h slotHeader, payload []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.matched[h.id]
	if m == nil {
		if h.id > p.rtsSeen {
			return fmt.Errorf("chunk of message %d, never announced", h.id)
		}
		return nil
	}
	if h.off != uint64(m.got) || h.size != uint64(m.size) || h.off+uint64(h.len) > uint64(m.size) {
		return fmt.Errorf("chunk of message %d (%d bytes) at offset %d, %d bytes (want offset %d of %d)",
			h.id, h.size, h.off, h.len, m.got, m.size)
	}
	if r := m.op; r != nil {
		r.busy = true
		p.mu.Unlock()
		copy(r.buf[h.off:], payload)
		p.mu.Lock()
		r.busy = false
		if r.stop != nil {
			stop := r.stop
			r.stop = nil
			p.end(r, stop)
		}
	}
	m.got += len(payload)
	if m.got == m.size {
		if q := p.complete(m); q != nil {
			p.match(m.tag, q)
		}
	}
	return nil
}

// retracted applies a retraction from the socket: one whose RTS is not
// drained yet (the socket can overtake the ring) is remembered and drops
// that RTS when it comes. A retraction of a message offered by address
// (ack) is answered ctlDone once nothing will read the message any more:
// at once, or when the read in progress ends (see receiveCMA).
func (p *peer) retracted(id uint64, ack bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.matched[id]; m != nil && m.cma {
		return nil // its read ends, then answers
	}
	if id <= p.rtsSeen {
		p.retract(id)
	} else {
		if len(p.early) >= 4*maxRTS {
			return fmt.Errorf("over %d early retractions", 4*maxRTS)
		}
		p.early[id] = true
	}
	if ack {
		p.clear(id, ctlDone)
	}
	return nil
}
