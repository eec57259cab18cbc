package msg

import (
	"fmt"
	"slices"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Defaults of the settings every carrier's configuration shares.
const (
	// DefaultEagerMax is the largest message sent before its Recv is
	// posted: 64 KiB and a small header (a 2-rank all-reduce's signature).
	DefaultEagerMax = 65 << 10
	// DefaultHeartbeatInterval is the longest default HeartbeatInterval:
	// the heartbeat also moves what arrives while nothing waits on a peer.
	DefaultHeartbeatInterval = 250 * time.Millisecond
	// DefaultPeerTimeout is how long a peer may stay silent by default.
	DefaultPeerTimeout = 10 * time.Second
	// DefaultHandshakeTimeout bounds one connection's handshake.
	DefaultHandshakeTimeout = 5 * time.Second
)

// Common is the part of a carrier's configuration that every carrier
// shares: who the rank is, its group's secret, the peers it links to, its
// eager limit and window, and its timeouts. A carrier copies its own
// Config's fields in, calls Normalize, and copies the result back.
type Common struct {
	Rank, Size        int
	Secret            []byte
	Peers             []int
	EagerMax          int
	MaxBuffered       int
	PeerTimeout       time.Duration
	HeartbeatInterval time.Duration
	HandshakeTimeout  time.Duration
}

// Normalize checks c and fills in its defaults: Secret (at least
// MinSecret bytes) and Peers become copies, Peers sorted (nil: every
// other rank; each in range, not this rank, once); zero limits take the
// defaults (MaxBuffered DefaultMaxBuffered, at most maxBuffered;
// HeartbeatInterval min(PeerTimeout/4, DefaultHeartbeatInterval), at most
// PeerTimeout/3). Its errors start with name and wrap
// transport.ErrBadArgument.
func (c Common) Normalize(name string, maxBuffered int) (Common, error) {
	bad := func(format string, a ...any) (Common, error) {
		return c, fmt.Errorf("%s: rank %d: config: %w: %s", name, c.Rank, transport.ErrBadArgument, fmt.Sprintf(format, a...))
	}
	if c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size {
		return bad("rank %d of size %d", c.Rank, c.Size)
	}
	if len(c.Secret) < MinSecret {
		return bad("secret of %d bytes, want at least %d", len(c.Secret), MinSecret)
	}
	peers, ok := c.sortedPeers()
	if !ok {
		return bad("peers %v (ranks of 0..%d, not this one, once each)", c.Peers, c.Size-1)
	}
	c.Peers = peers
	c.Secret = slices.Clone(c.Secret)
	if c.EagerMax == 0 {
		c.EagerMax = DefaultEagerMax
	}
	if c.MaxBuffered == 0 {
		c.MaxBuffered = DefaultMaxBuffered
	}
	if c.PeerTimeout == 0 {
		c.PeerTimeout = DefaultPeerTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = min(c.PeerTimeout/4, DefaultHeartbeatInterval)
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	switch {
	case c.EagerMax < 0:
		return bad("EagerMax %d", c.EagerMax)
	case c.MaxBuffered < Overhead || c.MaxBuffered > maxBuffered:
		return bad("MaxBuffered %d outside [%d, %d]", c.MaxBuffered, Overhead, maxBuffered)
	case c.PeerTimeout < 0 || c.HeartbeatInterval <= 0 || c.HeartbeatInterval > c.PeerTimeout/3:
		return bad("HeartbeatInterval %v for PeerTimeout %v (want 0 < interval <= timeout/3)",
			c.HeartbeatInterval, c.PeerTimeout)
	case c.HandshakeTimeout < 0:
		return bad("HandshakeTimeout %v", c.HandshakeTimeout)
	}
	return c, nil
}

// sortedPeers is c.Peers sorted (every other rank where nil), and whether
// they are ranks of the group other than this one, each once.
func (c Common) sortedPeers() ([]int, bool) {
	if c.Peers == nil {
		out := make([]int, 0, c.Size-1)
		for r := range c.Size {
			if r != c.Rank {
				out = append(out, r)
			}
		}
		return out, true
	}
	out := slices.Sorted(slices.Values(c.Peers))
	for i, r := range out {
		if r < 0 || r >= c.Size || r == c.Rank || (i > 0 && out[i-1] == r) {
			return nil, false
		}
	}
	return out, true
}
