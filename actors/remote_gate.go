package actors

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/choreo-gpu/choreo/internal/gate"
)

// errCut is a server handshake that a gate cut to make room.
var errCut = errors.New("handshake cut to make room")

// handshakeGates are a control server's two sets of handshake slots: a
// connection waits in quiet until the client's first message is read, then
// in spoken until the client has proved the secret, and then leaves both
// before the server accepts it. A client sends its first message as soon
// as it has connected, so it is normally in when the server takes the
// connection up and the connection goes straight to spoken; connections
// that never speak only ever fill quiet, where a full gate cuts the oldest
// of them. A connection that has proved the secret is never cut. Safe for
// concurrent use.
type handshakeGates struct{ quiet, spoken *gate.Gate }

func newHandshakeGates() *handshakeGates {
	return &handshakeGates{
		quiet:  gate.New(gate.DefaultSlots, gate.DefaultMinAge),
		spoken: gate.New(gate.DefaultSlots, gate.DefaultMinAge),
	}
}

// firstWait is how long admit waits, outside the gates, for a client's
// first message to arrive before it seats the connection in quiet: a
// client writes it right after connecting, but on a loaded machine it
// may land a little after the server has taken the connection up.
const firstWait = 50 * time.Millisecond

// admit seats c in spoken when the fixed part of the client's first
// message is in (peeked, not read) within firstWait, else in quiet; it
// fails with gate.ErrFull (c is left open). It leaves c's read deadline
// at end. The caller calls leave on the guest when the handshake ends,
// however it ends.
func (g *handshakeGates) admit(c net.Conn, end time.Time) (*guest, error) {
	gu := &guest{conn: c, spoken: g.spoken}
	first := g.quiet
	wait := time.Now().Add(firstWait)
	if end.Before(wait) {
		wait = end
	}
	if firstPartIn(c, wait) {
		first, gu.spoken = g.spoken, nil
	}
	_ = c.SetReadDeadline(end)
	if err := gu.sit(first); err != nil {
		return nil, err
	}
	return gu, nil
}

// firstPartIn reports whether the fixed part of a client's first message
// (version, nonce, address length) is in on c by the deadline, reading
// nothing; it stops waiting at the first byte that is not the version,
// and when the client closes. It sets c's read deadline.
func firstPartIn(c net.Conn, deadline time.Time) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	_ = c.SetReadDeadline(deadline)
	var b [hsClientFixed]byte
	n := -1
	_ = rc.Read(func(fd uintptr) bool {
		var err error
		n, _, err = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR):
			return false // nothing yet: wait for bytes, or the deadline
		case err != nil || n == 0 || n == hsClientFixed || b[0] != hsVersion:
			return true
		}
		return false // a part: wait for the rest
	})
	return n == hsClientFixed && b[0] == hsVersion && b[hsClientFixed-1] != 0
}

// guest is one server handshake's place in the gates: quiet until heard,
// then spoken until kept. Only the handshake's goroutine uses it.
type guest struct {
	conn   net.Conn
	spoken *gate.Gate // where heard moves the guest; nil once there
	seat   *seat
}

// sit gives the guest a slot of gt, or fails with gate.ErrFull.
func (g *guest) sit(gt *gate.Gate) error {
	s := &seat{Conn: g.conn}
	p, err := gt.Admit(s)
	if err != nil {
		return err
	}
	s.pass, g.seat = p, s
	return nil
}

// heard is told that the client's first message is in: a quiet guest
// moves to spoken (errCut if quiet cut it first, gate.ErrFull if spoken
// is full).
func (g *guest) heard() error {
	if g.spoken == nil {
		return nil
	}
	if !g.seat.leave() {
		return errCut
	}
	spoken := g.spoken
	g.spoken = nil
	return g.sit(spoken)
}

// keep takes the connection out of the gates for good, once the client
// has proved the secret; false if a gate cut it first.
func (g *guest) keep() bool { return g.seat.leave() }

// leave frees the guest's slot (after keep, or instead of it).
func (g *guest) leave() { g.seat.leave() }

// cut reports whether a gate closed the connection to make room.
func (g *guest) cut() bool { return g.seat.wasCut() }

// seat is a connection's place in one gate. The gate's Close (a cut)
// closes the connection until the handshake leaves; after that it does
// nothing, so a connection the handshake keeps is never cut.
type seat struct {
	net.Conn
	pass *gate.Pass

	mu        sync.Mutex
	left, cut bool
}

// Close is the gate's cut.
func (s *seat) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left {
		return nil
	}
	s.cut = true
	return s.Conn.Close()
}

// leave frees the slot and takes the connection out of the gate's reach;
// it reports false if the gate cut it first. A second call changes
// nothing.
func (s *seat) leave() bool {
	s.mu.Lock()
	s.left = s.left || !s.cut
	ok := s.left
	s.mu.Unlock()
	s.pass.Done()
	return ok
}

func (s *seat) wasCut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut
}
