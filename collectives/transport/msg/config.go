package msg

import (
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"go.uber.org/zap"
)

// Config is one rank's message layer: who it is and its limits. A
// transport package fills it from its own configuration.
type Config struct {
	// Rank is this endpoint's rank, 0 <= Rank < Size.
	Rank, Size int
	// Name prefixes the endpoint's errors ("tcp", "shm", ...); default
	// "msg".
	Name string
	// MaxBuffered bounds, per peer, the bytes of eager messages this rank
	// holds for Recvs not taken yet (each counting Overhead more): the
	// window the peer's link spends. A peer that overruns it breaks the
	// protocol.
	MaxBuffered int
	// PeerTimeout is how long a peer may stay silent before it is lost.
	PeerTimeout time.Duration
	// HeartbeatInterval is how often the Endpoint ticks its links (pings,
	// window hand-backs, silence checks); at most PeerTimeout/3.
	HeartbeatInterval time.Duration
	// Poll is the most a wait polls before it parks (see internal/spin;
	// 0: never polls). Links read it through Peer.Poll.
	Poll time.Duration
	// Logger, if set, logs the loss of peers; nil logs nothing.
	Logger *zap.Logger
}

// check reports what is wrong with c for links.
func (c Config) check(links []Link) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("msg: config: %w: %s", transport.ErrBadArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size:
		return bad("rank %d of size %d", c.Rank, c.Size)
	case len(links) != c.Size:
		return bad("%d links for %d ranks", len(links), c.Size)
	case links[c.Rank] != nil:
		return bad("a link to rank %d itself", c.Rank)
	case c.MaxBuffered < Overhead:
		return bad("MaxBuffered %d below %d", c.MaxBuffered, Overhead)
	case c.PeerTimeout <= 0 || c.HeartbeatInterval <= 0 || c.HeartbeatInterval > c.PeerTimeout/3:
		return bad("HeartbeatInterval %v for PeerTimeout %v (want 0 < interval <= timeout/3)",
			c.HeartbeatInterval, c.PeerTimeout)
	case c.Poll < 0:
		return bad("Poll %v", c.Poll)
	}
	for r, l := range links {
		if r != c.Rank && l == nil {
			return bad("no link to rank %d", r)
		}
	}
	return nil
}
