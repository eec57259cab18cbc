package msg

import (
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"go.uber.org/zap"
)

// Config is one rank's message layer: Rank and Size, the Name its errors
// start with (default "msg"), and MaxBuffered, PeerTimeout and
// HeartbeatInterval as in Setup (a peer that overruns MaxBuffered breaks
// the protocol). StartTimeout is how long a peer may stay silent before
// this rank first hears it (default and at least PeerTimeout): the ranks
// of a group finish connecting at different times, and a peer says
// nothing until its own Endpoint starts. Poll is the most a wait polls
// before it parks (see internal/spin; 0: never). Logger, if set, logs the
// loss of peers.
type Config struct {
	Rank, Size        int
	Name              string
	MaxBuffered       int
	PeerTimeout       time.Duration
	StartTimeout      time.Duration
	HeartbeatInterval time.Duration
	Poll              time.Duration
	Logger            *zap.Logger
}

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
	case c.StartTimeout < 0:
		return bad("StartTimeout %v", c.StartTimeout)
	}
	for r, l := range links {
		if r != c.Rank && l == nil {
			return bad("no link to rank %d", r)
		}
	}
	return nil
}
