package tcp

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/mesh"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// Listener is a rank's listening socket, opened before the ranks' addresses
// are handed out (so that a port the OS picked can be one of them) and
// used by exactly one Connect, which closes it.
type Listener struct {
	ln net.Listener
}

// Listen opens a TCP listener on addr ("host:port"; port 0 lets the OS
// pick one: read it back with Addr).
func Listen(addr string) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen: %w", err)
	}
	return &Listener{ln: ln}, nil
}

// Addr is the address the listener is bound to, "host:port".
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Close closes the listener (Connect does so itself).
func (l *Listener) Close() error { return l.ln.Close() }

// Connect joins the group without a Listener of the caller's: it listens
// on cfg.Addrs[cfg.Rank] (not where the rank only dials: rank 0, say) and
// goes on as Listener.Connect.
func Connect(ctx context.Context, cfg Config) (*Transport, error) {
	l, err := listenFor(cfg)
	if err != nil {
		return nil, err
	}
	return l.Connect(ctx, cfg)
}

// ConnectLinks is Connect without the Endpoint: it returns the links to
// cfg.Peers, indexed by rank (nil elsewhere), for a msg.Endpoint that may
// hold links of other transports too. That Endpoint's MaxBuffered must be
// at least cfg.MaxBuffered, the window this rank announces to its peers.
func ConnectLinks(ctx context.Context, cfg Config) ([]msg.Link, error) {
	l, err := listenFor(cfg)
	if err != nil {
		return nil, err
	}
	return l.ConnectLinks(ctx, cfg)
}

// listenFor listens on cfg.Addrs[cfg.Rank] where cfg's rank accepts
// connections, and returns nil where it does not.
func listenFor(cfg Config) (*Listener, error) {
	n, err := cfg.normalize()
	if err != nil || !n.accepts() {
		return nil, err
	}
	l, err := Listen(n.Addrs[n.Rank])
	if err != nil {
		return nil, fmt.Errorf("tcp: rank %d: %w", n.Rank, err)
	}
	return l, nil
}

// Connect builds this rank's part of the mesh and returns its endpoint
// once it has every connection to every peer (cfg.Peers): it joins
// package mesh's full mesh (label "tcp"), dialing cfg.ConnsPerPeer
// connections to each higher peer (retrying until the peer listens) and
// accepting as many from each lower peer on l, each rank announcing its
// MaxFrame and MaxBuffered in the handshake. Connections that fail the
// handshake are refused, counted (Stats.Refused) and passed to
// Config.OnRefused, and change nothing; what a stranger may cost is
// package mesh's bound. The listener is closed when Connect returns: a
// group's mesh is built once. ctx bounds the whole; on failure everything
// is closed and the error names the peers still missing.
func (l *Listener) Connect(ctx context.Context, cfg Config) (*Transport, error) {
	if cfg.Peers != nil && len(cfg.Peers) != cfg.Size-1 {
		if l != nil {
			_ = l.Close()
		}
		return nil, fmt.Errorf("tcp: rank %d: connect: %w: peers %v: an Endpoint links every other rank (ConnectLinks links some)",
			cfg.Rank, transport.ErrBadArgument, cfg.Peers)
	}
	t, err := l.build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := t.start(); err != nil {
		return nil, err
	}
	return t, nil
}

// ConnectLinks is Connect without the Endpoint (see the function
// ConnectLinks).
func (l *Listener) ConnectLinks(ctx context.Context, cfg Config) ([]msg.Link, error) {
	t, err := l.build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return t.msgLinks(), nil
}

// build connects cfg's rank to its peers (see Connect); it closes l.
func (l *Listener) build(ctx context.Context, cfg Config) (*Transport, error) {
	var ln net.Listener
	if l != nil {
		ln = l.ln
	}
	cfg, err := cfg.normalize()
	if err != nil || len(cfg.Peers) == 0 {
		if ln != nil {
			_ = ln.Close()
		}
		if err != nil {
			return nil, err
		}
		return newTransport(cfg), nil
	}
	if ln == nil && cfg.accepts() {
		return nil, fmt.Errorf("tcp: rank %d: connect: %w: no listener", cfg.Rank, transport.ErrBadArgument)
	}
	m, err := mesh.Connect(ctx, mesh.Config{
		Rank: cfg.Rank, Size: cfg.Size, Group: cfg.Group, Secret: cfg.Secret, Label: "tcp",
		Peers: cfg.Peers, ConnsPerPeer: cfg.ConnsPerPeer, Order: mesh.LowerDials, Listener: ln,
		Dial: func(ctx context.Context, p int) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", cfg.Addrs[p])
		},
		HandshakeTimeout: cfg.HandshakeTimeout, Hello: ourLimits(cfg), CheckHello: checkLimits,
		OnRefused: cfg.OnRefused,
	})
	if err != nil {
		return nil, err // "tcp mesh: rank R: connect: ..."
	}
	t := newTransport(cfg)
	t.refused.Store(m.Refused)
	for _, p := range cfg.Peers {
		t.attach(m.Links[p])
	}
	return t, nil
}

// attach installs a peer's authenticated connections in its link, which
// keeps the smallest limits they announced.
func (t *Transport) attach(ls []mesh.Link) {
	for _, ml := range ls {
		l := t.links[ml.Peer]
		maxFrame, window := peerLimits(ml.Hello)
		if tc, ok := ml.Conn.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		l.conns[ml.Index] = newConn(l, ml.Index, ml.Conn)
		if l.maxFrame == 0 { // the first of the peer's connections
			l.maxFrame, l.window = maxFrame, window
		}
		l.maxFrame, l.window = min(l.maxFrame, maxFrame), min(l.window, window)
	}
}

// The limits a rank announces in the handshake (big endian): MaxFrame u32
// [0:4], MaxBuffered u32 [4:8] (the window its peers may fill).
const limitsSize = 8

func ourLimits(cfg Config) []byte {
	b := make([]byte, limitsSize)
	binary.BigEndian.PutUint32(b[0:], uint32(cfg.MaxFrame))
	binary.BigEndian.PutUint32(b[4:], uint32(cfg.MaxBuffered))
	return b
}

// peerLimits reads limits checkLimits has checked.
func peerLimits(b []byte) (maxFrame, window int) {
	return int(binary.BigEndian.Uint32(b[0:])), int(binary.BigEndian.Uint32(b[4:]))
}

// checkLimits judges a peer's announced limits.
func checkLimits(_ int, b []byte) error {
	if len(b) != limitsSize {
		return fmt.Errorf("limits of %d bytes", len(b))
	}
	maxFrame, window := peerLimits(b)
	if maxFrame < minFrame || maxFrame > maxFrameLimit || window < msg.Overhead || window > maxFrameLimit {
		return fmt.Errorf("MaxFrame %d, window %d", maxFrame, window)
	}
	return nil
}
