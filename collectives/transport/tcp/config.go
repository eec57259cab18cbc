package tcp

import (
	"fmt"
	"slices"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// Defaults of Config's limits.
const (
	DefaultMaxFrame     = 1 << 20
	DefaultMaxBuffered  = 4 << 20
	DefaultEagerMax     = 65 << 10 // 64 KiB and a small header (a 2-rank all-reduce's signature)
	DefaultConnsPerPeer = 2
	// DefaultHeartbeatInterval is the longest default HeartbeatInterval:
	// the heartbeat also moves what arrives while nothing waits on a peer.
	DefaultHeartbeatInterval = 250 * time.Millisecond
	DefaultPeerTimeout       = 10 * time.Second
	// DefaultHandshakeTimeout bounds one connection's handshake.
	DefaultHandshakeTimeout = 5 * time.Second
	// MinSecret is the shortest Secret accepted.
	MinSecret = 16
	// maxConnsPerPeer bounds ConnsPerPeer.
	maxConnsPerPeer = 64
)

// Config describes one rank of a group and the limits of its connections.
// Every rank of a group is given the same Size, Group, Addrs, Secret and
// ConnsPerPeer; the other limits may differ (each side announces its own
// MaxFrame and MaxBuffered in the handshake). Zero limits take the
// defaults.
type Config struct {
	// Rank is this endpoint's rank, 0 <= Rank < Size.
	Rank, Size int
	// Group names this run: a connection from a rank of another run (a
	// stale process with an older id) is refused.
	Group uint64
	// Addrs holds every rank's "host:port", indexed by rank. A rank dials
	// the ranks above it and accepts the ranks below it.
	Addrs []string
	// Secret is shared by the ranks of the group (at least MinSecret
	// bytes); the handshake proves it, never sends it.
	Secret []byte
	// Peers are the ranks this rank links to, where another transport
	// links it to the others (a group across hosts); nil: every other
	// rank. Two ranks either list each other or neither does.
	Peers []int

	// MaxFrame is the largest frame payload this rank accepts (a larger
	// declared length drops the peer) and sends (large messages travel in
	// frames of min(both sides' MaxFrame)). Default DefaultMaxFrame.
	MaxFrame int
	// MaxBuffered bounds, per peer, the bytes this rank holds for Recvs
	// not posted yet (each message counts 64 bytes more). A sender that
	// would exceed it waits for the Recv instead (rendezvous), so an idle
	// receiver never makes memory grow. Default DefaultMaxBuffered.
	MaxBuffered int
	// EagerMax is the largest message sent before its Recv is posted, when
	// the peer's window has room; larger ones wait for the Recv. Default
	// DefaultEagerMax (capped by the peer's MaxFrame and MaxBuffered).
	EagerMax int
	// ConnsPerPeer is the number of TCP connections per pair of ranks;
	// a message travels on the connection its tag maps to (a collective's
	// steps take the connections in turn). Several let large messages of
	// different tags move at once (one connection's bytes are copied by
	// one sender and one reader at a time). Default DefaultConnsPerPeer.
	ConnsPerPeer int
	// PeerTimeout is how long a peer may stay silent before it is lost:
	// its pending and future operations fail with transport.ErrPeerLost.
	// Default DefaultPeerTimeout.
	PeerTimeout time.Duration
	// HeartbeatInterval is how often an idle connection is pinged and
	// peers' silence is checked; at most PeerTimeout/3. Default
	// min(PeerTimeout/4, DefaultHeartbeatInterval).
	HeartbeatInterval time.Duration
	// HandshakeTimeout bounds each connection's handshake. Default
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration

	// OnRefused, if set, is called (from a connection's goroutine, during
	// Connect; it must not block) with the reason each refused connection
	// was refused. Connections turned away because every handshake slot
	// was taken (errors.Is(err, gate.ErrFull)) are reported together, at
	// most once a second, in one error that gives their number. The
	// package itself never logs.
	OnRefused func(error)
}

// normalize checks c and fills in the defaults.
func (c Config) normalize() (_ Config, err error) {
	bad := func(format string, a ...any) (Config, error) {
		return c, fmt.Errorf("tcp: rank %d: config: %w: %s", c.Rank, transport.ErrBadArgument, fmt.Sprintf(format, a...))
	}
	if c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size {
		return bad("rank %d of size %d", c.Rank, c.Size)
	}
	if c.Size > 1 && len(c.Addrs) != c.Size {
		return bad("%d addresses for %d ranks", len(c.Addrs), c.Size)
	}
	if len(c.Secret) < MinSecret {
		return bad("secret of %d bytes, want at least %d", len(c.Secret), MinSecret)
	}
	if c.Peers, err = c.peers(); err != nil {
		return c, err
	}
	c.Secret = append([]byte(nil), c.Secret...)
	c.Addrs = append([]string(nil), c.Addrs...)
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.MaxFrame < minFrame || c.MaxFrame > maxFrameLimit {
		return bad("MaxFrame %d outside [%d, %d]", c.MaxFrame, minFrame, maxFrameLimit)
	}
	if c.MaxBuffered == 0 {
		c.MaxBuffered = DefaultMaxBuffered
	}
	if c.MaxBuffered < msg.Overhead || c.MaxBuffered > maxFrameLimit {
		return bad("MaxBuffered %d outside [%d, %d]", c.MaxBuffered, msg.Overhead, maxFrameLimit)
	}
	if c.EagerMax == 0 {
		c.EagerMax = DefaultEagerMax
	}
	if c.EagerMax < 0 {
		return bad("EagerMax %d", c.EagerMax)
	}
	if c.ConnsPerPeer == 0 {
		c.ConnsPerPeer = DefaultConnsPerPeer
	}
	if c.ConnsPerPeer < 1 || c.ConnsPerPeer > maxConnsPerPeer {
		return bad("ConnsPerPeer %d outside [1, %d]", c.ConnsPerPeer, maxConnsPerPeer)
	}
	if c.PeerTimeout == 0 {
		c.PeerTimeout = DefaultPeerTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = min(c.PeerTimeout/4, DefaultHeartbeatInterval)
	}
	if c.PeerTimeout < 0 || c.HeartbeatInterval <= 0 || c.HeartbeatInterval > c.PeerTimeout/3 {
		return bad("HeartbeatInterval %v for PeerTimeout %v (want 0 < interval <= timeout/3)", c.HeartbeatInterval, c.PeerTimeout)
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.HandshakeTimeout < 0 {
		return bad("HandshakeTimeout %v", c.HandshakeTimeout)
	}
	return c, nil
}

// peers checks c.Peers and returns them in increasing order (every other
// rank where c.Peers is nil).
func (c Config) peers() ([]int, error) {
	if c.Peers == nil {
		out := make([]int, 0, c.Size-1)
		for r := range c.Size {
			if r != c.Rank {
				out = append(out, r)
			}
		}
		return out, nil
	}
	out := slices.Clone(c.Peers)
	slices.Sort(out)
	for i, r := range out {
		if r < 0 || r >= c.Size || r == c.Rank || (i > 0 && out[i-1] == r) {
			return nil, fmt.Errorf("tcp: rank %d: config: %w: peers %v (ranks of 0..%d, not this one, once each)",
				c.Rank, transport.ErrBadArgument, c.Peers, c.Size-1)
		}
	}
	return out, nil
}

// accepts reports whether this rank accepts connections: from the peers
// below it (it dials those above).
func (c Config) accepts() bool { return len(c.Peers) > 0 && c.Peers[0] < c.Rank }
