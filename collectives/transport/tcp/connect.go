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

// Listener is a rank's listening socket, opened before the ranks'
// addresses are handed out and used by one ConnectLinks, which closes it.
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

// Close closes the listener (ConnectLinks does so itself).
func (l *Listener) Close() error { return l.ln.Close() }

// ConnectLinks joins the group's tcp mesh, with l for the lower peers
// that dial this rank (nil where none does), and returns the links to
// cfg.Peers by rank (nil elsewhere), for a msg.Endpoint whose MaxBuffered
// is at least cfg.MaxBuffered. It closes l. ctx bounds the whole; on
// failure everything is closed and the error names the peers missing.
func (l *Listener) ConnectLinks(ctx context.Context, cfg Config) ([]msg.Link, error) {
	var ln net.Listener
	if l != nil {
		ln = l.ln
	}
	cfg, err := cfg.normalize()
	if err == nil && ln == nil && cfg.accepts() {
		err = fmt.Errorf("tcp: rank %d: connect: %w: no listener", cfg.Rank, transport.ErrBadArgument)
	}
	if err != nil || len(cfg.Peers) == 0 {
		if ln != nil {
			_ = ln.Close()
		}
		if err != nil {
			return nil, err
		}
		return make([]msg.Link, cfg.Size), nil
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
	links := make([]msg.Link, cfg.Size)
	for _, p := range cfg.Peers {
		links[p] = newLink(&cfg, p, m.Links[p])
	}
	return links, nil
}

// limitsSize is the hello a rank announces (big endian): MaxFrame u32
// [0:4], MaxBuffered u32 [4:8] (the window its peers may fill).
const limitsSize = 8

func ourLimits(cfg Config) []byte {
	b := make([]byte, limitsSize)
	binary.BigEndian.PutUint32(b[0:], uint32(cfg.MaxFrame))
	binary.BigEndian.PutUint32(b[4:], uint32(cfg.MaxBuffered))
	return b
}

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
