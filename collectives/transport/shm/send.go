package shm

import (
	"context"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// sendOp is a rendezvous Send waiting for its clear-to-send.
type sendOp struct {
	key  transport.Tag // Group and Seq only
	cts  chan uint32   // the control entry's kind
	fail chan error    // abort, loss, close
	cma  bool          // offered by address: stays in sends until answered
	data []byte        // the bytes offered (kept reachable, and on the heap)
}

func (s *sendOp) failWith(err error) {
	select {
	case s.fail <- err:
	default:
	}
}

// Send delivers data to rank dst under tag.
func (t *Transport) Send(ctx context.Context, dst int, tag transport.Tag, data []byte) error {
	return t.wrap(dst, "send", tag, t.send(ctx, dst, tag, data))
}

func (t *Transport) send(ctx context.Context, dst int, tag transport.Tag, data []byte) error {
	p, err := t.peerOf(dst)
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
	if done, err := p.sendEager(ctx, tag, data, true); done {
		return err
	}
	return p.sendRendezvous(ctx, tag, data)
}

// TrySend sends data to rank dst under tag if it can go at once, without
// waiting for the receiver or for ring space: it fits EagerMax, the
// receiver's window has room and a slot is free. It reports whether it
// did; when it did not, nothing was sent and the caller may Send. With
// done true, err is what Send would have returned.
func (t *Transport) TrySend(ctx context.Context, dst int, tag transport.Tag, data []byte) (done bool, err error) {
	p, err := t.peerOf(dst)
	if err != nil {
		return true, t.wrap(dst, "send", tag, err)
	}
	if err := transport.CtxError(ctx); err != nil {
		return true, t.wrap(dst, "send", tag, err)
	}
	t.enter()
	defer t.exit()
	p.live.RLock()
	defer p.live.RUnlock()
	done, err = p.sendEager(ctx, tag, data, false)
	return done, t.wrap(dst, "send", tag, err)
}

// sendEager puts data in one slot when it fits the eager limit and the
// peer's window, reporting done; otherwise (done false) it sends nothing,
// and the message must wait for its Recv. With wait false it does not
// wait for a free slot either.
func (p *peer) sendEager(ctx context.Context, tag transport.Tag, data []byte, wait bool) (done bool, err error) {
	n := len(data)
	if n > p.eagerMax {
		return false, nil
	}
	p.mu.Lock()
	err = p.checkLocked(tag)
	p.mu.Unlock()
	if err != nil {
		return true, err
	}
	cost := uint64(n) + msgOverhead
	ok, err := p.put(ctx, wait, func(s []byte) bool {
		if uint64(p.window) < p.sent-p.out.freed.Load()+cost {
			return false
		}
		p.sent += cost
		h := slotHeader{kind: slotEager, len: uint32(n), tag: tag, size: uint64(n)}
		h.put(s)
		copy(s[slotHdr:], data)
		return true
	})
	return ok || err != nil, err
}

// sendRendezvous announces data (RTS), waits for the receiver's Recv
// (CTS), then copies it into slots.
func (p *peer) sendRendezvous(ctx context.Context, tag transport.Tag, data []byte) error {
	t := p.t
	select {
	case p.turns <- struct{}{}:
	case <-ctx.Done():
		return transport.CtxError(ctx)
	case <-p.gone:
		return p.downErr()
	}
	defer func() { <-p.turns }()
	n := len(data)
	s := &sendOp{key: tag.Collective(), cts: make(chan uint32, 1), fail: make(chan error, 1)}
	// Offered by address (see cma.go): data is kept in s, which the
	// peer's sends map holds, so it lives on the heap, where the
	// collector does not move it.
	rts := uint32(slotRTS)
	var addr uint64
	if c := p.t.cfg.CMAMin; c > 0 && n >= c {
		s.cma, s.data = true, data
		rts, addr = slotRTSCMA, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(data))))
	}
	var id uint64
	var refused error
	ok, err := p.put(ctx, true, func(slot []byte) bool {
		p.mu.Lock()
		if refused = p.checkLocked(tag); refused != nil {
			p.mu.Unlock()
			return false
		}
		p.nextID++
		id = p.nextID
		p.sends[id] = s
		p.mu.Unlock()
		h := slotHeader{kind: rts, tag: tag, id: id, size: uint64(n), off: addr}
		h.put(slot)
		return true
	})
	if err != nil {
		return err
	}
	if !ok {
		return refused
	}
	// giveUp forgets the send, withdraws the message if asked, and
	// returns err.
	giveUp := func(retract bool, err error) error {
		p.mu.Lock()
		if p.sends[id] == s {
			delete(p.sends, id)
		}
		p.mu.Unlock()
		if retract {
			p.sock.send((&frame{kind: fRetract, id: id}).bytes())
		}
		return err
	}
	var kind uint32
	start := time.Now()
	p.poll(func() bool { return len(s.cts) > 0 || len(s.fail) > 0 })
	rc := recheck{p: p}
	defer rc.stop()
wait:
	for {
		select {
		case kind = <-s.cts:
			t.poll.Waited(time.Since(start))
			break wait
		case err := <-s.fail:
			// An answer that came before the peer's end (what it
			// published is handed over first) is the answer.
			select {
			case kind = <-s.cts:
				t.poll.Waited(time.Since(start))
				break wait
			default:
			}
			if s.cma && !p.down.Load() && !t.closed.Load() {
				return giveUp(false, p.withdraw(s, id, err, &rc))
			}
			return giveUp(false, err)
		case <-ctx.Done():
			if s.cma {
				return giveUp(false, p.withdraw(s, id, transport.CtxError(ctx), &rc))
			}
			return giveUp(true, transport.CtxError(ctx))
		case <-t.done:
			return giveUp(false, transport.ErrClosed)
		case <-rc.C():
			rc.fire()
		}
	}
	switch kind {
	case ctlDone:
		if !s.cma {
			p.protocol(fmt.Errorf("message %d read by address, never offered so", id))
			return giveUp(false, p.downErr())
		}
		runtime.KeepAlive(data)
		return giveUp(false, nil)
	case ctlCTS:
		s.cma = false // through the slots after all
	}
	if kind == ctlCTSSize {
		return giveUp(false, fmt.Errorf("%w: sent %d bytes, the receiver's buffer differs", transport.ErrSizeMismatch, n))
	}
	for off := 0; off < n; {
		select {
		case err := <-s.fail:
			return giveUp(true, err)
		default:
		}
		k := min(n-off, p.out.slotSize)
		_, err := p.put(ctx, true, func(slot []byte) bool {
			h := slotHeader{kind: slotChunk, len: uint32(k), id: id, size: uint64(n), off: uint64(off)}
			h.put(slot)
			copy(slot[slotHdr:], data[off:off+k])
			return true
		})
		if err != nil {
			return giveUp(true, err)
		}
		off += k
	}
	return giveUp(false, nil)
}

// withdraw retracts message id, offered by address, after its Send ended
// with err (an abort, its context), and waits until the receiver answers:
// then nothing reads the message any more, and the caller may have its
// buffer back. It returns err, or the error that ended the wait first
// (the peer lost, this endpoint closed: nothing waits for the peer then).
func (p *peer) withdraw(s *sendOp, id uint64, err error, rc *recheck) error {
	p.sock.send((&frame{kind: fRetract, flags: 1, id: id}).bytes())
	for {
		select {
		case <-s.cts:
			runtime.KeepAlive(s.data)
			return err
		case <-p.gone:
			return p.downErr()
		case <-p.t.done:
			return transport.ErrClosed
		case <-rc.C():
			rc.fire()
		}
	}
}

// put fills the next slot of out with fill and publishes it, waiting for a
// free slot (spinning briefly, then until the peer's SPACE frame) unless
// wait is false. fill runs under wmu and may decline (false); put then
// reports false and publishes nothing, as it does when the ring is full
// and wait is false. It fails when ctx ends or the peer goes down first.
// The caller holds p.live.
func (p *peer) put(ctx context.Context, wait bool, fill func(slot []byte) bool) (bool, error) {
	l := p.out
	slots := uint64(l.slots)
	for {
		p.wmu.Lock()
		if p.down.Load() {
			p.wmu.Unlock()
			return false, p.downErr()
		}
		head := l.head.Load()
		free := func() bool { return head-l.tail.Load() < slots }
		if free() || (wait && spin.Until(p.t.poll.Budget(), free)) {
			if !fill(l.slot(head)) {
				p.wmu.Unlock()
				return false, nil
			}
			l.head.Store(head + 1)
			p.wmu.Unlock()
			p.notify()
			return true, nil
		}
		if !wait {
			p.wmu.Unlock()
			return false, nil
		}
		// Full: ask the consumer for a SPACE frame once half the ring is
		// free, then check again (the consumer stores tail, then loads
		// waitTail; this side the other way round: one of them sees the
		// other's store).
		ch := p.spaceChan()
		l.waitTail.Store(head - slots + max(1, slots/2))
		if free() {
			p.wmu.Unlock()
			continue
		}
		p.wmu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false, transport.CtxError(ctx)
		case <-p.gone:
			return false, p.downErr()
		}
	}
}
