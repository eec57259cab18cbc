package gate

import (
	"fmt"
	"net"
	"sync"
)

// ErrCut fails a handshake that a gate cut to make room for a newer one;
// it counts as turned away for room (errors.Is(err, ErrFull)).
var ErrCut = fmt.Errorf("gate: handshake cut to make room for a newer connection (%w)", ErrFull)

// Door is a listener's two gates for a handshake in which the dialer
// speaks first: a connection waits in quiet until the dialer's first
// message is in, then in spoken until the dialer has proved the secret,
// and then leaves both before the listener tells the dialer it may use
// the connection. A real dialer writes its first message as soon as it has
// connected, so it is normally in when the listener takes the connection
// up (Peek tells) and the connection goes straight to spoken; connections
// that never speak only ever fill quiet, where a full gate cuts the oldest
// of them. A connection that has proved the secret is never cut. Safe for
// concurrent use.
type Door struct{ quiet, spoken *Gate }

// NewDoor makes a door of two gates of the default size.
func NewDoor() *Door {
	return &Door{quiet: New(DefaultSlots, DefaultMinAge), spoken: New(DefaultSlots, DefaultMinAge)}
}

// Admit seats c in spoken when its dialer has spoken (its first message
// is in), else in quiet; it fails with ErrFull (c is left open: the caller
// closes it). The caller calls Leave on the guest when the handshake ends,
// however it ends.
func (d *Door) Admit(c net.Conn, spoke bool) (*Guest, error) {
	g := &Guest{conn: c, spoken: d.spoken}
	first := d.quiet
	if spoke {
		first, g.spoken = d.spoken, nil
	}
	if err := g.sit(first); err != nil {
		return nil, err
	}
	return g, nil
}

// Guest is one handshake's place behind a door: quiet until Heard, then
// spoken until Keep. Only the handshake's goroutine uses it.
type Guest struct {
	conn   net.Conn
	spoken *Gate // where Heard moves the guest; nil once there
	seat   *seat
}

// sit gives the guest a slot of gt, or fails with ErrFull.
func (g *Guest) sit(gt *Gate) error {
	s := &seat{Conn: g.conn}
	p, err := gt.Admit(s)
	if err != nil {
		return err
	}
	s.pass, g.seat = p, s
	return nil
}

// Heard is told that the dialer's first message is in: a quiet guest
// moves to spoken (ErrCut if quiet cut it first, ErrFull if spoken is
// full).
func (g *Guest) Heard() error {
	if g.spoken == nil {
		return nil
	}
	if !g.seat.leave() {
		return ErrCut
	}
	spoken := g.spoken
	g.spoken = nil
	return g.sit(spoken)
}

// Keep takes the connection out of the gates for good, once the dialer
// has proved the secret; false if a gate cut it first.
func (g *Guest) Keep() bool { return g.seat.leave() }

// Leave frees the guest's slot (after Keep, or instead of it).
func (g *Guest) Leave() { g.seat.leave() }

// Cut reports whether a gate closed the connection to make room.
func (g *Guest) Cut() bool { return g.seat.wasCut() }

// seat is a connection's place in one gate. The gate's Close (a cut)
// closes the connection until the handshake leaves; after that it does
// nothing, so a connection the handshake keeps is never cut.
type seat struct {
	net.Conn
	pass *Pass

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

// Stats reports the counts of the door's two gates.
func (d *Door) Stats() (quiet, spoken Stats) { return d.quiet.Stats(), d.spoken.Stats() }
