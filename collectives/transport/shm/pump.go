package shm

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/choreo-gpu/choreo/internal/spin"
)

const (
	// linger is how long a pump keeps running after the transport's last
	// call ended; drainLinger is how long a pump the heartbeat starts on an
	// idle peer runs.
	linger      = 20 * time.Millisecond
	drainLinger = 2 * time.Millisecond
)

// kick makes sure a pump runs for p. One started for a call runs until the
// calls end (then lingers); one started with d > 0 (the heartbeat's, on an
// idle transport) stops after d unless calls come. A pump is started on a
// peer that is down too: it unmaps the region and ends.
func (p *peer) kick(d time.Duration) {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	if p.running || p.unmapped.Load() {
		return
	}
	p.armed = d > 0
	if p.armed {
		_ = p.sock.nc.SetReadDeadline(time.Now().Add(d))
	} else {
		_ = p.sock.nc.SetReadDeadline(time.Time{})
	}
	p.running = p.t.goAdd(p.pump)
}

// stopped records that the pump ended.
func (p *peer) stopped() {
	p.lmu.Lock()
	p.running = false
	p.lmu.Unlock()
}

// idle lets the pump stop after linger (the transport's last call ended).
func (p *peer) idle() {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	if p.running && !p.armed {
		p.armed = true
		_ = p.sock.nc.SetReadDeadline(time.Now().Add(linger))
	}
}

// lingered decides, once the pump's read deadline passed, whether it ends
// (no call in flight, nothing published) or goes on without a deadline.
func (p *peer) lingered(pending bool) (stop bool) {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	p.armed = false
	if p.t.busy.Load() > 0 || pending || p.down.Load() {
		_ = p.sock.nc.SetReadDeadline(time.Time{})
		return false
	}
	p.running = false
	return true
}

// ensureArmed gives the pump's coming wait a deadline if no call is in
// flight: an idle pump must end.
func (p *peer) ensureArmed() {
	if p.t.busy.Load() > 0 {
		return
	}
	p.lmu.Lock()
	defer p.lmu.Unlock()
	if !p.armed {
		p.armed = true
		_ = p.sock.nc.SetReadDeadline(time.Now().Add(linger))
	}
}

// pump is p's goroutine while it has work: the only consumer of the lane
// in and the only reader of the socket. It handles socket frames as they
// come; hands clear-to-sends to the sends waiting for them; delivers eager
// messages (straight into a posted Recv's buffer, else into a copy);
// matches announced ones; and copies chunks straight into their Recv's
// buffer. When nothing is left it polls briefly (while calls are in
// flight), then sets in's sleep word and blocks on the socket: a doorbell,
// any other frame, the socket's end, or its linger deadline wakes it.
// After the socket's end it drains what the peer published, then loses
// the peer. Once p is down it unmaps the region and ends.
func (p *peer) pump() {
	// One pump runs at a time (running), and only a pump or Close after
	// the last pump ends unmaps: the region stays mapped for the whole
	// pump if it is mapped now.
	if p.down.Load() {
		p.unmap()
		p.stopped()
		return
	}
	in := p.in
	s := &pumpState{p: p, in: in, buf: make([]byte, maxFrame+1)}
	for {
		if p.down.Load() {
			p.unmap()
			p.stopped()
			return
		}
		worked := false
		// Reading the socket costs a system call: between waits it is
		// polled every pollEvery rounds (its frames are rare, and a
		// doorbell needs no reading to have done its work).
		s.rounds++
		for s.rounds%pollEvery == 1 && !s.eof && !p.down.Load() {
			r := s.handle(p.sock.poll(s.buf))
			if r == readStop {
				return
			}
			if r != readFrame {
				break
			}
			worked = true
		}
		p.cons.Lock()
		if p.control() {
			worked, s.recent = true, true
		}
		if p.slots() {
			worked, s.recent = true, true
		}
		p.cons.Unlock()
		if worked || p.down.Load() {
			continue
		}
		if s.eof {
			if !p.published() {
				p.lose(errors.New("its socket closed (its process ended or it closed its endpoint)"))
			}
			continue // what was published before the end is delivered first
		}
		// Poll while calls are in flight, and after work (the call that
		// work was for may just have returned, before the next begins);
		// not while a call polls the lane itself (see poll).
		if (s.recent || p.t.busy.Load() > 0) && in.polling.Load() == 0 {
			s.recent = false
			polls := 0
			if spin.Until(spin.Budget(), func() bool {
				polls++
				if polls%readableEvery == 0 && p.sock.readable() {
					s.rounds = 0 // poll it next round
					return true
				}
				return p.published()
			}) {
				continue
			}
		}
		in.sleep.Store(1)
		if p.published() {
			in.sleep.Store(0)
			continue
		}
		p.ensureArmed()
		n, err := p.sock.wait(s.buf)
		// Before handle: a pump that ends there is followed by a new one,
		// whose sleep word this must not clear.
		in.sleep.Store(0)
		if s.handle(n, err) == readStop {
			return
		}
	}
}

// pumpState is a pump's socket buffer and its loop's state.
type pumpState struct {
	p      *peer
	in     *lane
	buf    []byte
	eof    bool // the socket ended
	rounds int  // rounds of the pump's loop
	recent bool // the last rounds consumed the lane, and no poll followed
}

// pollEvery is how many rounds of a busy pump pass between two polls of
// the socket; readableEvery is how many polls of the lane a spinning pump
// makes between two looks at the socket (a system call, where a poll of
// the lane is two loads).
const (
	pollEvery     = 16
	readableEvery = 1024
)

// published reports whether the peer published slots or control entries
// not consumed yet.
func (p *peer) published() bool {
	in := p.in
	return in.head.Load() != in.tail.Load() || in.ctlHead.Load() != in.ctlTail.Load()
}

// What a socket read gave.
const (
	readNone  = iota // nothing (yet), or an error that lost the peer
	readFrame        // a frame, handled
	readStop         // the linger passed with nothing to do: the pump ends
)

// handle processes the result of a socket read (n < 0: nothing to read;
// n == 0: the socket's end).
func (s *pumpState) handle(n int, err error) int {
	p := s.p
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		if p.lingered(p.published()) {
			return readStop
		}
	case err != nil:
		p.lose(readError(err))
	case n == 0:
		s.eof = true
	case n > 0:
		p.lastRead.Store(p.t.now())
		if err := p.frame(s.buf[:n]); err != nil {
			p.protocol(err)
		}
		return readFrame
	}
	return readNone
}

// control hands the published clear-to-sends to their sends, reporting
// whether there were any. p.cons is held.
func (p *peer) control() bool {
	in := p.in
	worked := false
	t := in.ctlTail.Load()
	for h := in.ctlHead.Load(); t != h && !p.down.Load(); worked = true {
		if h-t > ctlEntries {
			p.protocol(fmt.Errorf("%d control entries published in a ring of %d", h-t, ctlEntries))
			break
		}
		kind, id := getCtl(in.ctl(t))
		t++
		in.ctlTail.Store(t)
		if kind != ctlCTS && kind != ctlCTSSize && kind != ctlDone {
			p.protocol(fmt.Errorf("control entry of kind %d", kind))
			break
		}
		p.cleared(id, kind)
	}
	return worked
}

// slots processes up to a ring's worth of published slots, reporting
// whether there were any. p.cons is held.
func (p *peer) slots() bool {
	in := p.in
	n := uint64(in.slots)
	worked := false
	t := in.tail.Load()
	for h, i := in.head.Load(), uint64(0); t != h && i < n && !p.down.Load(); i++ {
		if h-t > n {
			p.protocol(fmt.Errorf("%d slots published in a ring of %d", h-t, n))
			break
		}
		if err := p.slot(in.slot(t)); err != nil {
			p.protocol(err)
			break
		}
		t++
		in.tail.Store(t)
		worked = true
		// A sender waiting for room is told once half the ring is free
		// (see put).
		if w := in.waitTail.Load(); w != 0 && t >= w && in.waitTail.CompareAndSwap(w, 0) {
			p.sock.send(spaceFrame)
		}
	}
	return worked
}

// frame handles one socket frame.
func (p *peer) frame(b []byte) error {
	if len(b) > maxFrame {
		return fmt.Errorf("frame over %d bytes", maxFrame)
	}
	f, err := parseFrame(b)
	if err != nil {
		return err
	}
	switch f.kind {
	case fData: // a doorbell: the pump is awake
	case fSpace:
		p.spaced()
	case fCTS:
		kind := uint32(ctlCTS)
		switch f.flags {
		case 1:
			kind = ctlCTSSize
		case 2:
			kind = ctlDone
		}
		p.cleared(f.id, kind)
	case fRetract:
		return p.retracted(f.id, f.flags == 1)
	case fAbort:
		p.t.remoteAbort(p, &f)
	case fPing:
	}
	return nil
}
