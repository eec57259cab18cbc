package mesh

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Defaults and limits of Config.
const (
	DefaultHandshakeTimeout = 5 * time.Second
	MinSecret               = 16
	MaxConnsPerPeer         = 64
)

// Order says which rank of a pair dials the other: the lower (each rank
// dials its higher peers and accepts its lower ones) or the higher.
type Order uint8

const (
	LowerDials Order = iota
	HigherDials
)

// Config is one rank's part of a mesh. Every rank of a group gives the
// same Size, Group, Secret, Label, Order and ConnsPerPeer, and Peers that
// agree (rank a lists b exactly when b lists a); Hello may differ.
type Config struct {
	// Rank, Size, Group, Secret (at least MinSecret bytes) and Peers (nil:
	// every other rank) are as in a carrier's msg.Setup.
	Rank, Size int
	Group      uint64
	Secret     []byte
	Peers      []int
	// Label names the kind of link ("tcp", "shm": at most MaxLabel bytes
	// of lower-case letters, digits, '.', '_' and '-'); it is part of
	// every message and proof.
	Label string
	// ConnsPerPeer is how many connections each pair has (default 1), and
	// Order which rank of a pair dials (default LowerDials).
	ConnsPerPeer int
	Order        Order
	// Listener is where the peers that dial this rank connect (nil when
	// none does); Connect closes it. Dial connects to peer rank, within
	// ctx; it is retried until the peer listens.
	Listener net.Listener
	Dial     func(ctx context.Context, rank int) (net.Conn, error)
	// HandshakeTimeout bounds each connection's handshake (default
	// DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// Hello is what this rank announces to each peer inside the
	// handshake (at most MaxHello bytes), such as its limits; CheckHello,
	// if set, judges a peer's before this rank proves anything to it (an
	// error refuses the connection as ErrConfig).
	Hello      []byte
	CheckHello func(rank int, hello []byte) error
	// Setup, if set, runs on both sides of each connection once both have
	// proved the secret, under Connect's context, not the handshake's
	// deadline (Link.Dialed tells which side this is; a loaded host may
	// take seconds, and a dialer that gave up after its acceptor had kept
	// the link would leave it dead): what it makes it keeps in Link.Extra, closed
	// with the connection if Connect fails. An error closes the
	// connection, which the dialer dials again.
	Setup func(ctx context.Context, l *Link) error
	// OnRefused, if set, is called (from a connection's goroutine; it must
	// not block) with why each connection was refused; those the gate
	// turned away for room come together, at most once a second.
	OnRefused func(error)
}

func bad(format string, args ...any) error {
	return fmt.Errorf("mesh: config: %w: %s", transport.ErrBadArgument, fmt.Sprintf(format, args...))
}

// normalize checks c and fills in the defaults; it copies Peers, Secret
// and Hello.
func (c Config) normalize() (Config, error) {
	if c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size {
		return c, bad("rank %d of %d", c.Rank, c.Size)
	}
	if len(c.Secret) < MinSecret {
		return c, bad("secret of %d bytes, want at least %d", len(c.Secret), MinSecret)
	}
	if !labelOK(c.Label) {
		return c, bad("label %q", c.Label)
	}
	if len(c.Hello) > MaxHello {
		return c, bad("hello of %d bytes, over %d", len(c.Hello), MaxHello)
	}
	c.ConnsPerPeer = cmp.Or(c.ConnsPerPeer, 1)
	if c.ConnsPerPeer < 1 || c.ConnsPerPeer > MaxConnsPerPeer {
		return c, bad("ConnsPerPeer %d", c.ConnsPerPeer)
	}
	c.HandshakeTimeout = cmp.Or(c.HandshakeTimeout, DefaultHandshakeTimeout)
	if c.HandshakeTimeout < 0 || c.Order > HigherDials {
		return c, bad("HandshakeTimeout %v, Order %d", c.HandshakeTimeout, c.Order)
	}
	if err := c.normalizePeers(); err != nil {
		return c, err
	}
	c.Secret = slices.Clone(c.Secret)
	c.Hello = slices.Clone(c.Hello)
	return c, nil
}

// normalizePeers checks Peers and that this rank can dial and accept whom
// it must.
func (c *Config) normalizePeers() error {
	if c.Peers == nil {
		for r := range c.Size {
			if r != c.Rank {
				c.Peers = append(c.Peers, r)
			}
		}
	} else {
		c.Peers = slices.Clone(c.Peers)
		slices.Sort(c.Peers)
	}
	for i, p := range c.Peers {
		if p < 0 || p >= c.Size || p == c.Rank || (i > 0 && c.Peers[i-1] == p) {
			return bad("peers %v of rank %d of %d", c.Peers, c.Rank, c.Size)
		}
		if c.dials(p) && c.Dial == nil {
			return bad("no Dial, and rank %d dials peer %d", c.Rank, p)
		}
		if !c.dials(p) && c.Listener == nil {
			return bad("no Listener, and peer %d dials rank %d", p, c.Rank)
		}
	}
	return nil
}

func (c *Config) dials(p int) bool { return (p > c.Rank) == (c.Order == LowerDials) }

func (c *Config) dialedBy(p int) bool {
	_, ok := slices.BinarySearch(c.Peers, p)
	return ok && !c.dials(p)
}

func labelOK(s string) bool {
	if s == "" || len(s) > MaxLabel {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
