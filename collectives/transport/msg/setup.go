package msg

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Defaults of Setup's limits. DefaultEagerMax is 64 KiB and a small
// header (a 2-rank all-reduce's signature); DefaultHeartbeatInterval is
// the longest default, since the heartbeat also moves what arrives while
// nothing waits on a peer.
const (
	DefaultEagerMax          = 65 << 10
	DefaultHeartbeatInterval = 250 * time.Millisecond
	DefaultPeerTimeout       = 10 * time.Second
	DefaultHandshakeTimeout  = 5 * time.Second
)

// Setup is one rank's part of a group as a carrier's Connect sees it,
// and the limits of its links. Every rank of a group is given the same
// Size, Group, Run, Secret and Addrs, and Peers that agree (rank a lists b
// exactly when b lists a); the limits may differ (each side announces its
// window to its peers). Zero limits take the defaults (see Normalize).
type Setup struct {
	// Rank is this rank, 0 <= Rank < Size.
	Rank, Size int
	// Group is the group's id: a connection from a rank of another group
	// (a stale process with an older id) is refused. Run names the run,
	// for names that must be unique to it (a host's socket names).
	Group uint64
	Run   string
	// Secret is shared by the ranks of the group (at least MinSecret
	// bytes); the handshake proves it, never sends it.
	Secret []byte
	// Peers are the ranks to link to, where another carrier links this
	// rank to the others; nil: every other rank.
	Peers []int
	// Addrs holds every rank's Prepared.Addr for this carrier, by rank.
	Addrs []string
	// EagerMax is the largest message sent before its Recv is posted,
	// when the peer's window has room (capped by what the link carries in
	// one piece). Default DefaultEagerMax.
	EagerMax int
	// MaxBuffered is the window this rank announces to every peer: the
	// bytes it holds, per peer, for Recvs not posted yet (each message
	// counting Overhead more); the Endpoint over the links checks the
	// same. Default DefaultMaxBuffered.
	MaxBuffered int
	// PeerTimeout is how long a peer may stay silent before it is lost.
	// Default DefaultPeerTimeout.
	PeerTimeout time.Duration
	// HeartbeatInterval is how often idle peers are pinged and their
	// silence checked; at most PeerTimeout/3. Default
	// min(PeerTimeout/4, DefaultHeartbeatInterval).
	HeartbeatInterval time.Duration
	// HandshakeTimeout bounds each connection's handshake. Default
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// OnRefused, if set, is called (from a connection's goroutine, while
	// the links connect; it must not block) with why each refused
	// connection was refused, as package mesh reports them.
	OnRefused func(error)
}

// Normalize checks c and fills in the defaults (MaxBuffered at most
// maxBuffered); Secret, Peers and Addrs become copies, Peers sorted. Its
// errors start with name and wrap transport.ErrBadArgument.
func (c Setup) Normalize(name string, maxBuffered int) (Setup, error) {
	bad := func(format string, a ...any) (Setup, error) {
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
	c.Peers, c.Secret, c.Addrs = peers, slices.Clone(c.Secret), slices.Clone(c.Addrs)
	c.EagerMax = cmp.Or(c.EagerMax, DefaultEagerMax)
	c.MaxBuffered = cmp.Or(c.MaxBuffered, DefaultMaxBuffered)
	c.PeerTimeout = cmp.Or(c.PeerTimeout, DefaultPeerTimeout)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, min(c.PeerTimeout/4, DefaultHeartbeatInterval))
	c.HandshakeTimeout = cmp.Or(c.HandshakeTimeout, DefaultHandshakeTimeout)
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
// they are other ranks of the group, each once.
func (c Setup) sortedPeers() ([]int, bool) {
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
