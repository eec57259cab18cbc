package mesh

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

const (
	firstBackoff = 2 * time.Millisecond
	maxBackoff   = 100 * time.Millisecond
)

func (b *builder) dialLoop(ctx context.Context, p, i int) {
	backoff := firstBackoff
	for {
		err := b.dialOne(ctx, p, i)
		if err == nil {
			return
		}
		b.noteErr(p, err)
		if final(err) {
			b.fail(fmt.Errorf("rank %d: %w", p, err))
			return
		}
		tm := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			tm.Stop()
			return
		case <-tm.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// final reports whether a dial's failure cannot pass by dialling again:
// the peer refused this rank's proof, handshake version, link kind or
// configuration, or proved a secret that differs from this rank's.
// (Another group at the address, a rank taken or a link being set up
// twice may pass: a stale process ends, the mesh settles.)
func final(err error) bool {
	for _, e := range []error{ErrAuth, ErrVersion, ErrLabel, ErrConfig} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// dialOne dials link i of peer p once: the connection, the handshake and
// Setup, within HandshakeTimeout.
func (b *builder) dialOne(ctx context.Context, p, i int) error {
	hctx, cancel := context.WithTimeout(ctx, b.cfg.HandshakeTimeout)
	defer cancel()
	nc, err := b.cfg.Dial(hctx, p)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	stop := bound(hctx, nc)
	l, err := b.dialHandshake(nc, p, i)
	if err == nil {
		err = b.settle(ctx, hctx, &l, stop)
	} else {
		stop()
	}
	if err != nil {
		_ = nc.Close()
		return err
	}
	return nil
}

// bound gives nc ctx's deadline, and a deadline in the past once ctx
// ends; the returned func undoes the latter and reports whether ctx ended
// first.
func bound(ctx context.Context, nc net.Conn) func() bool {
	if d, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(d)
	}
	return context.AfterFunc(ctx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
}

// dialHandshake runs the dialer's side of link i to peer p on nc.
func (b *builder) dialHandshake(nc net.Conn, p, i int) (Link, error) {
	c := &b.cfg
	hello := b.ourMsg(hsHello, p, i)
	hb := hello.encode()
	if _, err := nc.Write(hb); err != nil {
		return Link{}, err
	}
	ch, cb, err := readHS(nc, hsChallenge)
	if err != nil { // closed unread: a full acceptor, or one that cut it, is dialled again
		return Link{}, fmt.Errorf("waiting for the challenge: %w", err)
	}
	if ch.Status != stOK {
		return Link{}, refusal(ch.Status)
	}
	if err := b.judge(&ch, p, i); err != nil {
		return Link{}, err
	}
	proof := hsMsg{Version: protoVersion, Kind: hsProof, Nonce: handshakeMAC(c.Secret, c.Label, roleDialer, hb, cb)}
	if _, err := nc.Write(proof.encode()); err != nil {
		return Link{}, err
	}
	v, _, err := readHS(nc, hsVerdict)
	if err != nil {
		return Link{}, fmt.Errorf("waiting for the verdict: %w", err)
	}
	if v.Status != stOK {
		return Link{}, refusal(v.Status)
	}
	if want := handshakeMAC(c.Secret, c.Label, roleAcceptor, hb, cb); !hmac.Equal(v.Nonce[:], want[:]) {
		return Link{}, fmt.Errorf("%w: the peer does not know the secret", ErrAuth)
	}
	return Link{Peer: p, Index: i, Dialed: true, Conn: nc, Hello: ch.Hello}, nil
}

// ourMsg is the hello (as a dialer) or challenge (as an acceptor) this
// rank sends on link i of peer p.
func (b *builder) ourMsg(kind uint8, p, i int) hsMsg {
	c := &b.cfg
	return hsMsg{
		Version: protoVersion,
		Kind:    kind,
		Group:   c.Group,
		From:    uint32(c.Rank),
		To:      uint32(p),
		Size:    uint32(c.Size),
		Conn:    uint16(i),
		Conns:   uint16(c.ConnsPerPeer),
		Label:   labelOf(c.Label),
		Nonce:   nonce(),
		Hello:   c.Hello,
	}
}

// judge checks a peer's hello or challenge against this rank's view:
// from rank p (p < 0: any rank that dials this one) on link i (i < 0:
// any), then Config.CheckHello on its payload.
func (b *builder) judge(m *hsMsg, p, i int) error {
	c := &b.cfg
	fromOK := (p >= 0 && m.From == uint32(p)) || (p < 0 && m.From < uint32(c.Size) && c.dialedBy(int(m.From)))
	switch {
	case m.Version != protoVersion:
		return fmt.Errorf("%w: version %d, want %d", ErrVersion, m.Version, protoVersion)
	case m.Group != c.Group:
		return fmt.Errorf("%w: group %d, want %d (a rank of another run?)", ErrGroup, m.Group, c.Group)
	case m.Label != labelOf(c.Label):
		return fmt.Errorf("%w: %q, want %q", ErrLabel, bytes.TrimRight(m.Label[:], "\x00"), c.Label)
	case m.To != uint32(c.Rank) || !fromOK:
		return fmt.Errorf("%w: ranks %d->%d", ErrRank, m.From, m.To)
	case m.Size != uint32(c.Size) || m.Conns != uint16(c.ConnsPerPeer) || m.Conn >= m.Conns ||
		(i >= 0 && m.Conn != uint16(i)):
		return fmt.Errorf("%w: size %d, connection %d of %d", ErrConfig, m.Size, m.Conn, m.Conns)
	}
	if c.CheckHello != nil {
		if err := c.CheckHello(int(m.From), m.Hello); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	return nil
}

func readHS(r io.Reader, kind uint8) (hsMsg, []byte, error) {
	b := make([]byte, hsSize)
	if _, err := io.ReadFull(r, b); err != nil {
		return hsMsg{}, nil, err
	}
	m, err := decodeHS(b)
	if err != nil {
		return m, nil, err
	}
	if m.Kind != kind {
		return m, nil, fmt.Errorf("%w: kind %d, want %d", ErrHandshake, m.Kind, kind)
	}
	return m, b, nil
}

func nonce() [32]byte {
	var n [32]byte
	_, _ = rand.Read(n[:])
	return n
}
