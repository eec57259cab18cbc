package shm

import (
	"fmt"
	"math"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// consume hands the Peer what in holds (control entries, then up to a
// ring's worth of slots), waking the Waits if there was any, and reports
// whether there was. The caller holds cons, between enter and leave.
func (l *link) consume() (worked bool, err error) {
	worked, err = l.control()
	if err == nil {
		var w bool
		w, err = l.slots()
		worked = worked || w
	}
	if worked && l.waits.Load() > 0 {
		l.waken.fire()
	}
	return worked, err
}

// published reports whether the peer published what is not consumed yet.
// The caller is between enter and leave.
func (l *link) published() bool {
	in := l.in
	return in.head.Load() != in.tail.Load() || in.ctlHead.Load() != in.ctlTail.Load()
}

func (l *link) control() (worked bool, err error) {
	in := l.in
	t := in.ctlTail.Load()
	for h := in.ctlHead.Load(); t != h; worked = true {
		if h-t > ctlEntries {
			return worked, protocol(fmt.Errorf("%d control entries published in a ring of %d", h-t, ctlEntries))
		}
		kind, id := getCtl(in.ctl(t))
		t++
		in.ctlTail.Store(t)
		if kind < ctlCTS || kind > ctlDone {
			return worked, protocol(fmt.Errorf("control entry of kind %d", kind))
		}
		l.peer.Answered(id, msg.Answer(kind-ctlCTS))
	}
	return worked, nil
}

func (l *link) slots() (worked bool, err error) {
	in := l.in
	n := uint64(in.slots)
	t := in.tail.Load()
	for h, i := in.head.Load(), uint64(0); t != h && i < n; i++ {
		if h-t > n {
			return worked, protocol(fmt.Errorf("%d slots published in a ring of %d", h-t, n))
		}
		if err := l.slot(in.slot(t)); err != nil {
			return worked, protocol(err)
		}
		t++
		in.tail.Store(t)
		worked = true
		if w := in.waitTail.Load(); w != 0 && t >= w && in.waitTail.CompareAndSwap(w, 0) {
			l.sock.send(spaceFrame)
		}
	}
	return worked, nil
}

func (l *link) slot(s []byte) error {
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
		sk, err := l.peer.Eager(h.tag, len(payload))
		if err != nil {
			return err
		}
		sk.Copy(payload)
		return sk.Done()
	case slotRTS, slotRTSCMA:
		return l.announced(h)
	case slotChunk:
		sk, err := l.peer.Chunk(h.id, h.off, len(payload))
		if err != nil {
			return err
		}
		sk.Copy(payload)
		return sk.Done()
	}
	return fmt.Errorf("slot of kind %d", h.kind)
}

// announced hands an RTS to the Peer, unless its retraction overtook it
// on the socket; an offer by address goes on only where this process may
// read the sender's memory.
func (l *link) announced(h slotHeader) error {
	if h.len != 0 {
		return fmt.Errorf("RTS with %d bytes", h.len)
	}
	addr := uint64(0)
	if h.kind == slotRTSCMA {
		if h.size == 0 || h.off == 0 || h.off+h.size < h.off || h.off+h.size > maxUserAddr {
			return fmt.Errorf("message of %d bytes offered at %#x", h.size, h.off)
		}
		if l.cmaPID != 0 {
			addr = h.off
		}
	}
	if l.early[h.id] {
		delete(l.early, h.id)
		return nil
	}
	if h.kind == slotRTS {
		return l.peer.Announced(0, h.tag, h.id, h.size, 0)
	}
	l.offer(h.id) // before: the answer may come at once
	err := l.peer.Announced(0, h.tag, h.id, h.size, addr)
	if err != nil {
		l.answered(h.id)
	}
	return err
}

// retracted applies a RETRACT frame: to the Peer where the RTS was
// consumed, else the RTS is dropped when it is, and an ack is answered
// Done at once. The caller holds cons, between enter and leave.
func (l *link) retracted(id uint64, ack bool) error {
	if !l.queued(id) {
		return l.peer.Retracted(id, ack)
	}
	l.early[id] = true // at most one per slot of the ring
	if ack {
		l.Answer(0, id, msg.Done)
	}
	return nil
}

func (l *link) queued(id uint64) bool {
	in := l.in
	t, h := in.tail.Load(), in.head.Load()
	if h-t > uint64(in.slots) {
		return false // a broken ring: the consumer reports it
	}
	for ; t != h; t++ {
		s := getSlotHeader(in.slot(t))
		if (s.kind == slotRTS || s.kind == slotRTSCMA) && s.id == id {
			return true
		}
	}
	return false
}

func (l *link) frame(b []byte) error {
	if len(b) > maxFrame {
		return fmt.Errorf("frame over %d bytes", maxFrame)
	}
	f, err := parseFrame(b)
	if err != nil {
		return err
	}
	switch f.kind {
	case fSpace:
		l.space.fire()
	case fCTS:
		if f.flags > ctlDone-ctlCTS {
			return fmt.Errorf("answer frame with flags %d", f.flags)
		}
		l.peer.Answered(f.id, msg.Answer(f.flags))
	case fRetract:
		l.cons.Lock()
		defer l.cons.Unlock()
		return l.retracted(f.id, f.flags == 1)
	case fAbort:
		l.peer.Aborted(f.group, f.seq, int64(f.id), transport.CauseCode(f.code), string(f.text))
	}
	return nil // fData: a doorbell, the pump is awake; fPing
}
