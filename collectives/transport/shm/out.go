package shm

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// Eager: the peer hands its window back through out's freed word.
func (l *link) Eager(ctx context.Context, tag transport.Tag, data []byte, wait bool) (bool, error) {
	n := len(data)
	if n > l.eagerMax {
		return false, nil
	}
	cost := uint64(n) + msg.Overhead
	ok, err := l.put(ctx, wait, func(s []byte) bool {
		if uint64(l.window) < l.sent-l.out.freed.Load()+cost {
			return false
		}
		l.sent += cost
		(&slotHeader{kind: slotEager, len: uint32(n), tag: tag, size: uint64(n)}).put(s)
		copy(s[slotHdr:], data)
		return true
	})
	return ok || err != nil, err
}

// Announce offers a message of Config.CMAMin bytes or more by address.
func (l *link) Announce(ctx context.Context, tag transport.Tag, id uint64, data []byte) (sent, offered bool, err error) {
	h := slotHeader{kind: slotRTS, tag: tag, id: id, size: uint64(len(data))}
	if c := l.cfg.CMAMin; c > 0 && len(data) >= c {
		h.kind, h.off = slotRTSCMA, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(data))))
	}
	sent, err = l.put(ctx, true, func(s []byte) bool {
		h.put(s)
		return true
	})
	return sent, sent && h.kind == slotRTSCMA, err
}

func (l *link) Chunk(ctx context.Context, tag transport.Tag, id uint64, off int, part []byte) (bool, error) {
	if len(part) > l.out.slotSize {
		return false, fmt.Errorf("chunk of %d bytes in slots of %d: %w", len(part), l.out.slotSize, transport.ErrBadArgument)
	}
	return l.put(ctx, true, func(s []byte) bool {
		(&slotHeader{kind: slotChunk, len: uint32(len(part)), id: id, off: uint64(off)}).put(s)
		copy(s[slotHdr:], part)
		return true
	})
}

// put fills the next slot of out with fill (under wmu; it may decline)
// and publishes it, waiting for a free slot (spinning, then until the
// peer's SPACE frame) unless wait is false. It fails when ctx ends or the
// link goes down first.
func (l *link) put(ctx context.Context, wait bool, fill func(slot []byte) bool) (bool, error) {
	for {
		if !l.enter() {
			return false, l.downErr()
		}
		ok, full := l.fill(wait, fill)
		l.leave()
		if full == nil {
			return ok, nil
		}
		// Full: a pump reads the peer's SPACE frame meanwhile.
		l.Hold(0)
		select {
		case <-full:
		case <-ctx.Done():
		case <-l.gone:
		}
		l.Release(0, false)
		if err := transport.CtxError(ctx); err != nil {
			return false, err
		}
	}
}

// fill is one try of put: whether fill published a slot, or the channel
// to wait on when the ring is full. The caller is between enter and leave.
func (l *link) fill(wait bool, fill func(slot []byte) bool) (ok bool, full <-chan struct{}) {
	o := l.out
	slots := uint64(o.slots)
	l.wmu.Lock()
	head := o.head.Load()
	free := func() bool { return head-o.tail.Load() < slots }
	if free() || (wait && spin.Until(l.peer.Poll().Budget(), free)) {
		ok = fill(o.slot(head))
		if ok {
			o.head.Store(head + 1)
		}
		l.wmu.Unlock()
		if ok {
			l.notify()
		}
		return ok, nil
	}
	if !wait {
		l.wmu.Unlock()
		return false, nil
	}
	// Ask the consumer for a SPACE frame once half the ring is free, then
	// check again (the consumer stores tail, then loads waitTail; this
	// side the other way round: one of them sees the other's store).
	ch := l.space.C()
	o.waitTail.Store(head - slots + max(1, slots/2))
	if free() {
		ch = closed
	}
	l.wmu.Unlock()
	return false, ch
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// notify rings the peer's doorbell, after a publication in out, if its
// pump sleeps and no call of the peer polls the lane.
func (l *link) notify() {
	if l.out.polling.Load() != 0 {
		return // the poller consumes it, or does once it stops (see poll)
	}
	if s := l.out.sleep; s.Load() == 1 && s.CompareAndSwap(1, 0) {
		l.sock.send(dataFrame)
	}
}

// Answer goes in out's control ring, or on the socket when it is full.
func (l *link) Answer(_ int, id uint64, a msg.Answer) {
	kind := [...]uint32{msg.Go: ctlCTS, msg.SizeMismatch: ctlCTSSize, msg.Done: ctlDone}[a]
	l.answered(id)
	if !l.enter() {
		return
	}
	defer l.leave()
	l.cmu.Lock()
	o := l.out
	h := o.ctlHead.Load()
	if h-o.ctlTail.Load() < ctlEntries {
		putCtl(o.ctl(h), kind, id)
		o.ctlHead.Store(h + 1)
		l.cmu.Unlock()
		l.notify()
		return
	}
	l.cmu.Unlock()
	l.sock.send((&frame{kind: fCTS, flags: uint8(kind - ctlCTS), id: id}).bytes())
}

func (l *link) Retract(_ transport.Tag, id uint64, ack bool) {
	f := frame{kind: fRetract, id: id}
	if ack {
		f.flags = 1
	}
	l.sock.send(f.bytes())
}

func (l *link) Consumed(n int64) {
	if l.enter() {
		l.in.freed.Add(uint64(n))
		l.leave()
	}
}

func (l *link) Abort(a *transport.AbortError, at int64) {
	text := a.Cause.Error()
	if len(text) > maxAbortText {
		text = text[:maxAbortText]
	}
	l.sock.send((&frame{kind: fAbort, group: a.Group, seq: a.Seq, id: uint64(at),
		code: uint32(transport.CodeOf(a.Cause)), text: []byte(text)}).bytes())
}

// Frames without fields, encoded once.
var (
	pingFrame  = (&frame{kind: fPing}).bytes()
	dataFrame  = (&frame{kind: fData}).bytes()
	spaceFrame = (&frame{kind: fSpace}).bytes()
)
