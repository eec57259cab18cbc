package tcp

import (
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// Defaults of Config's limits: those every carrier shares are the message
// layer's (package msg).
const (
	DefaultMaxFrame    = 1 << 20
	DefaultMaxBuffered = msg.DefaultMaxBuffered
	// DefaultEagerMax is capped by the peer's MaxFrame and MaxBuffered.
	DefaultEagerMax     = msg.DefaultEagerMax
	DefaultConnsPerPeer = 2
	// maxConnsPerPeer bounds ConnsPerPeer.
	maxConnsPerPeer = 64

	// Liveness, handshake and secret: the defaults every carrier shares.
	DefaultHeartbeatInterval = msg.DefaultHeartbeatInterval
	DefaultPeerTimeout       = msg.DefaultPeerTimeout
	DefaultHandshakeTimeout  = msg.DefaultHandshakeTimeout
	MinSecret                = msg.MinSecret
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

// normalize checks c and fills in the defaults: those every carrier
// shares through msg.Common, then tcp's own.
func (c Config) normalize() (Config, error) {
	com, err := msg.Common{Rank: c.Rank, Size: c.Size, Secret: c.Secret, Peers: c.Peers,
		EagerMax: c.EagerMax, MaxBuffered: c.MaxBuffered, PeerTimeout: c.PeerTimeout,
		HeartbeatInterval: c.HeartbeatInterval, HandshakeTimeout: c.HandshakeTimeout}.Normalize("tcp", maxFrameLimit)
	if err != nil {
		return c, err
	}
	c.Secret, c.Peers, c.EagerMax, c.MaxBuffered = com.Secret, com.Peers, com.EagerMax, com.MaxBuffered
	c.PeerTimeout, c.HeartbeatInterval, c.HandshakeTimeout = com.PeerTimeout, com.HeartbeatInterval, com.HandshakeTimeout
	bad := func(format string, a ...any) (Config, error) {
		return c, fmt.Errorf("tcp: rank %d: config: %w: %s", c.Rank, transport.ErrBadArgument, fmt.Sprintf(format, a...))
	}
	if c.Size > 1 && len(c.Addrs) != c.Size {
		return bad("%d addresses for %d ranks", len(c.Addrs), c.Size)
	}
	c.Addrs = append([]string(nil), c.Addrs...)
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.MaxFrame < minFrame || c.MaxFrame > maxFrameLimit {
		return bad("MaxFrame %d outside [%d, %d]", c.MaxFrame, minFrame, maxFrameLimit)
	}
	if c.ConnsPerPeer == 0 {
		c.ConnsPerPeer = DefaultConnsPerPeer
	}
	if c.ConnsPerPeer < 1 || c.ConnsPerPeer > maxConnsPerPeer {
		return bad("ConnsPerPeer %d outside [1, %d]", c.ConnsPerPeer, maxConnsPerPeer)
	}
	return c, nil
}

// accepts reports whether this rank accepts connections: from the peers
// below it (it dials those above).
func (c Config) accepts() bool { return len(c.Peers) > 0 && c.Peers[0] < c.Rank }
