package shm

import (
	"errors"
	"os"
	"time"

	"github.com/choreo-gpu/choreo/internal/spin"
)

const (
	// linger is how long a pump stays active after the last Hold ended;
	// drainLinger how long one that Tick starts on an idle link runs.
	linger      = 20 * time.Millisecond
	drainLinger = 2 * time.Millisecond
)

func (l *link) Hold(int) {
	if l.holds.Add(1) == 1 {
		l.kick(0)
	}
}

func (l *link) Release(int, bool) {
	if l.holds.Add(-1) == 0 {
		l.lmu.Lock()
		defer l.lmu.Unlock()
		if l.running && !l.parked && !l.armed {
			l.arm(linger)
		}
	}
}

// kick starts a pump, or wakes a parked one (with d > 0, Tick's: only
// where the peer published). One started for a Hold (d == 0) runs until
// the Holds end, then lingers; one Tick starts stops after d.
func (l *link) kick(d time.Duration) {
	l.lmu.Lock()
	defer l.lmu.Unlock()
	switch {
	case l.down.Load():
	case !l.running:
		l.armed = false
		_ = l.sock.nc.SetReadDeadline(time.Time{})
		if d > 0 {
			l.arm(d)
		}
		l.running = l.goAdd(func() {
			if cause := l.pump(); cause != nil {
				l.fail(cause)
			}
		})
	case l.parked && (d == 0 || l.pending()):
		l.wakeLocked()
	}
}

func (l *link) wakeLocked() {
	l.parked = false
	l.armed = true
	_ = l.sock.nc.SetReadDeadline(aLongTimeAgo)
}

// offer notes that the Peer holds message id, offered by address: its
// sender waits for the answer also when it withdraws the offer, so the
// pump parks rather than ends until then (see settle).
func (l *link) offer(id uint64) {
	l.omu.Lock()
	l.offers[id] = true
	l.omu.Unlock()
}

func (l *link) answered(id uint64) {
	l.omu.Lock()
	last := l.offers[id] && len(l.offers) == 1
	delete(l.offers, id)
	l.omu.Unlock()
	if last {
		l.lmu.Lock()
		if l.parked {
			l.wakeLocked()
		}
		l.lmu.Unlock()
	}
}

func (l *link) offering() bool {
	l.omu.Lock()
	defer l.omu.Unlock()
	return len(l.offers) > 0
}

func (l *link) arm(d time.Duration) {
	l.armed = true
	_ = l.sock.nc.SetReadDeadline(time.Now().Add(d))
}

// settle decides, once the pump's read deadline passed, whether it stays
// active (something holds it, or the peer published), parks or ends. It
// parks while the Peer holds an offer (see offer): it then reads the
// socket only, with no deadline and no sleep word set, until a frame
// comes or kick wakes it.
func (l *link) settle(pending bool) (stop bool) {
	l.lmu.Lock()
	defer l.lmu.Unlock()
	l.armed = false
	_ = l.sock.nc.SetReadDeadline(time.Time{})
	l.parked = false
	switch {
	case l.holds.Load() > 0 || pending:
		return false
	case l.offering():
		l.parked = true
		return false
	}
	l.running = false
	return true
}

// pump is l's goroutine while it has work: it reads the socket and
// consumes the lane in, handing what comes to the Peer. With nothing
// left it polls briefly (while something holds it), then sets in's sleep
// word and blocks on the socket until a doorbell, another frame, the
// socket's end or its linger deadline. After the socket's end it drains
// what the peer published and returns why the link is lost.
func (l *link) pump() error {
	s := &pumpState{l: l, buf: make([]byte, maxFrame+1)}
	return s.run()
}

// pumpState is a pump's socket buffer and its loop's state.
type pumpState struct {
	l      *link
	buf    []byte
	eof    bool // the socket ended
	rounds int  // rounds of the pump's loop
	recent bool // the last rounds consumed the lane, and no poll followed
}

// pollEvery is how many rounds of a busy pump pass between two polls of
// the socket (a system call); readableEvery how many polls of the lane
// (two loads) a spinning pump makes between two looks at the socket.
const (
	pollEvery     = 16
	readableEvery = 1024
)

// What a pump's round leads to.
const (
	roundAgain = iota // go on
	roundSleep        // nothing to do: block on the socket
	roundStop         // the pump ends
)

func (s *pumpState) run() error {
	l := s.l
	for {
		next, err := s.round()
		switch {
		case err != nil:
			return err
		case next == roundStop:
			return nil
		case next == roundAgain:
			continue
		}
		n, err := l.sock.wait(s.buf)
		if !l.enter() {
			return nil
		}
		// Before handle: a pump that ends there is followed by a new one,
		// whose sleep word this must not clear.
		l.in.sleep.Store(0)
		next, err = s.handle(n, err)
		l.leave()
		if err != nil || next == roundStop {
			return err
		}
	}
}

// round reads what waits on the socket (every pollEvery rounds) and in
// the lane, polls for more while that may pay, and otherwise sets the
// sleep word for the socket wait that follows.
func (s *pumpState) round() (int, error) {
	l := s.l
	if !l.enter() {
		return roundStop, nil
	}
	defer l.leave()
	worked := false
	s.rounds++
	for s.rounds%pollEvery == 1 && !s.eof {
		next, err := s.handle(l.sock.poll(s.buf))
		if err != nil || next == roundStop {
			return roundStop, err
		}
		if next != roundAgain {
			break
		}
		worked = true
	}
	l.cons.Lock()
	w, err := l.consume()
	l.cons.Unlock()
	if err != nil {
		return roundStop, err
	}
	if worked && l.waits.Load() > 0 {
		l.waken.fire() // a frame: an answer, an abort
	}
	if w || worked {
		s.recent = true
		return roundAgain, nil
	}
	if s.eof {
		return roundStop, errors.New("its socket closed (its process ended or it closed its endpoint)")
	}
	return s.idle(), nil
}

// idle polls the lane while something holds the pump, or after work (the
// next call may be about to begin), unless a call polls it itself; then
// it sets the sleep word, unless the peer published meanwhile.
func (s *pumpState) idle() int {
	l := s.l
	in := l.in
	if (s.recent || l.holds.Load() > 0) && in.polling.Load() == 0 {
		s.recent = false
		polls := 0
		if spin.Until(spin.Budget(), func() bool {
			polls++
			if polls%readableEvery == 0 && l.sock.readable() {
				s.rounds = 0 // poll it next round
				return true
			}
			return l.published()
		}) {
			return roundAgain
		}
	}
	l.lmu.Lock()
	parked := l.parked
	if !parked && l.holds.Load() == 0 && !l.armed {
		l.arm(linger) // an idle pump parks
	}
	l.lmu.Unlock()
	if parked {
		return roundSleep
	}
	in.sleep.Store(1)
	if l.published() {
		in.sleep.Store(0)
		return roundAgain
	}
	return roundSleep
}

// handle processes the result of a socket read (n < 0: nothing to read;
// n == 0: the socket's end).
func (s *pumpState) handle(n int, err error) (int, error) {
	l := s.l
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		if l.settle(l.published()) {
			return roundStop, nil
		}
		return roundAgain, nil
	case err != nil:
		if l.down.Load() {
			return roundStop, nil
		}
		return roundStop, readError(err)
	case n == 0:
		s.eof = true
	case n > 0:
		l.lastRead.Store(time.Now().UnixNano())
		if err := l.frame(s.buf[:n]); err != nil {
			return roundStop, protocol(err)
		}
		return roundAgain, nil
	}
	return roundSleep, nil
}

func (l *link) pending() bool {
	if !l.enter() {
		return false
	}
	defer l.leave()
	return l.published()
}
