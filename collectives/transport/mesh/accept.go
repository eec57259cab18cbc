package mesh

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/choreo-gpu/choreo/internal/gate"
)

// firstBytesMax bounds how long an acceptor waits for a dialer's hello (at
// most HandshakeTimeout): a connection that says nothing leaves after it.
const firstBytesMax = 2 * time.Second

// acceptLoop accepts connections until the listener closes. Each waits
// behind one door (see gate.Door): in spoken when the dialer's hello is in
// when it is accepted, else in quiet until its hello is read, then in
// spoken. A flood of silent connections fills quiet only, and a real
// dialer, who sends its hello as soon as it connects, need not outlast
// them there.
func (b *builder) acceptLoop(ctx context.Context, ln net.Listener) {
	door := gate.NewDoor()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (out of descriptors): pause briefly.
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		seat, err := door.Admit(nc, helloIn(nc))
		if err != nil {
			_ = nc.Close()
			b.report.turnedAway(nc.RemoteAddr(), err)
			continue
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			err := b.acceptOne(ctx, &guest{Conn: nc, seat: seat})
			seat.Leave()
			if err == nil {
				return
			}
			_ = nc.Close()
			if seat.Cut() {
				err = gate.ErrCut
			}
			if errors.Is(err, gate.ErrFull) {
				b.report.turnedAway(nc.RemoteAddr(), err)
			} else {
				b.report.refuse(nc.RemoteAddr(), err)
			}
		}()
	}
}

// helloIn reports whether a hello waits to be read on nc, reading nothing
// (one byte more than a hello is peeked: on a stream, a real dialer sends
// nothing after its hello before the challenge; on a packet socket, a
// longer message is no hello).
func helloIn(nc net.Conn) bool {
	var b [hsSize + 1]byte
	if gate.Peek(nc, b[:], time.Time{}, nil) != hsSize {
		return false
	}
	m, err := decodeHS(b[:hsSize])
	return err == nil && m.Kind == hsHello
}

// guest is an accepted connection while its handshake runs, with its
// place behind the acceptor's door (seat; nil: no door): its reads wait at
// most firstBytesMax for the hello, and until the handshake's deadline
// after it; the end of ctx wakes them at once. Only the handshake's
// goroutine uses a guest.
type guest struct {
	net.Conn
	ctx  context.Context
	seat *gate.Guest
}

// start bounds the handshake by ctx (whose deadline is the handshake's)
// and the hello by first; the returned func stops the waking at ctx's end
// and reports whether it came first.
func (g *guest) start(ctx context.Context, first time.Duration) func() bool {
	g.ctx = ctx
	stop := bound(ctx, g.Conn)
	if d, ok := ctx.Deadline(); ok && time.Until(d) > first {
		_ = g.Conn.SetReadDeadline(time.Now().Add(first))
	}
	return stop
}

// heard is told that the hello is in: the reads get the handshake's
// deadline, and a quiet guest moves to spoken (gate.ErrCut if quiet cut
// it first; gate.ErrFull if spoken is full).
func (g *guest) heard() error {
	if d, ok := g.ctx.Deadline(); ok {
		_ = g.Conn.SetReadDeadline(d)
	}
	if g.ctx.Err() != nil { // ctx ended before the line above: wake it again
		_ = g.Conn.SetDeadline(aLongTimeAgo)
	}
	if g.seat == nil {
		return nil
	}
	return g.seat.Heard()
}

// keep takes the guest out of the gates once its dialer has proved the
// secret; false if a gate cut it first.
func (g *guest) keep() bool { return g.seat == nil || g.seat.Keep() }

// acceptOne runs the handshake and Setup on an accepted connection,
// within HandshakeTimeout; the caller closes it when it fails.
func (b *builder) acceptOne(ctx context.Context, g *guest) error {
	hctx, cancel := context.WithTimeout(ctx, b.cfg.HandshakeTimeout)
	defer cancel()
	stop := g.start(hctx, firstBytesMax)
	l, err := b.acceptHandshake(g)
	if err != nil {
		stop()
		return err
	}
	if err := b.settle(ctx, hctx, &l, stop); err != nil {
		b.unreserve(l.Peer, l.Index)
		return err
	}
	return nil
}

// acceptHandshake runs the acceptor's side on g; once the dialer has
// proved the secret it takes g out of the gates and reserves the link.
func (b *builder) acceptHandshake(g *guest) (Link, error) {
	c := &b.cfg
	hello, hb, err := readHS(g, hsHello)
	if err != nil {
		return Link{}, err
	}
	if err := g.heard(); err != nil {
		return Link{}, err
	}
	p, i := int(hello.From), int(hello.Conn)
	ch := b.ourMsg(hsChallenge, p, i)
	if err := b.judge(&hello, -1, -1); err != nil {
		ch.Status, ch.Nonce, ch.Hello = statusOf(err), [32]byte{}, nil
		_, _ = g.Write(ch.encode())
		return Link{}, err
	}
	cb := ch.encode()
	if _, err := g.Write(cb); err != nil {
		return Link{}, err
	}
	proof, _, err := readHS(g, hsProof)
	if err != nil {
		return Link{}, err
	}
	v := hsMsg{Version: protoVersion, Kind: hsVerdict}
	if want := handshakeMAC(c.Secret, c.Label, roleDialer, hb, cb); !hmac.Equal(proof.Nonce[:], want[:]) {
		v.Status = stMAC
		_, _ = g.Write(v.encode())
		return Link{}, fmt.Errorf("%w: rank %d's proof", ErrAuth, p)
	}
	if !g.keep() {
		return Link{}, gate.ErrCut
	}
	if !b.reserve(p, i) {
		v.Status = stDuplicate
		_, _ = g.Write(v.encode())
		return Link{}, fmt.Errorf("%w: rank %d connection %d", ErrDuplicate, p, i)
	}
	v.Nonce = handshakeMAC(c.Secret, c.Label, roleAcceptor, hb, cb)
	if _, err := g.Write(v.encode()); err != nil {
		b.unreserve(p, i)
		return Link{}, err
	}
	return Link{Peer: p, Index: i, Conn: g.Conn, Hello: hello.Hello}, nil
}
