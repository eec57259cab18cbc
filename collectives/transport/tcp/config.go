package tcp

import (
	"cmp"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// Defaults of Config's own limits (msg.Setup's are package msg's).
const (
	DefaultMaxFrame     = 1 << 20
	DefaultConnsPerPeer = 2
	// maxConnsPerPeer bounds ConnsPerPeer.
	maxConnsPerPeer = 64
)

// Config is one rank's part of a tcp mesh: the Setup every carrier gets
// (Addrs holds each rank's "host:port") and tcp's own limits. Every rank
// is given the same ConnsPerPeer; each side announces its own MaxFrame
// and MaxBuffered in the handshake, and EagerMax is capped by the peer's
// MaxFrame and window.
type Config struct {
	msg.Setup
	// MaxFrame is the largest frame payload this rank accepts (a larger
	// declared length drops the peer) and sends (large messages travel in
	// frames of min(both sides' MaxFrame)). Default DefaultMaxFrame.
	MaxFrame int
	// ConnsPerPeer is the number of TCP connections per pair of ranks;
	// a message travels on the connection its tag maps to (a collective's
	// steps take the connections in turn). Several let large messages of
	// different tags move at once. Default DefaultConnsPerPeer.
	ConnsPerPeer int
}

// normalize checks c and fills in the defaults.
func (c Config) normalize() (Config, error) {
	var err error
	if c.Setup, err = c.Setup.Normalize("tcp", maxFrameLimit); err != nil {
		return c, err
	}
	bad := func(format string, a ...any) (Config, error) {
		return c, fmt.Errorf("tcp: rank %d: config: %w: %s", c.Rank, transport.ErrBadArgument, fmt.Sprintf(format, a...))
	}
	if c.Size > 1 && len(c.Addrs) != c.Size {
		return bad("%d addresses for %d ranks", len(c.Addrs), c.Size)
	}
	c.MaxFrame = cmp.Or(c.MaxFrame, DefaultMaxFrame)
	if c.MaxFrame < minFrame || c.MaxFrame > maxFrameLimit {
		return bad("MaxFrame %d outside [%d, %d]", c.MaxFrame, minFrame, maxFrameLimit)
	}
	c.ConnsPerPeer = cmp.Or(c.ConnsPerPeer, DefaultConnsPerPeer)
	if c.ConnsPerPeer < 1 || c.ConnsPerPeer > maxConnsPerPeer {
		return bad("ConnsPerPeer %d outside [1, %d]", c.ConnsPerPeer, maxConnsPerPeer)
	}
	return c, nil
}

// accepts reports whether this rank accepts connections: from the peers
// below it (it dials those above).
func (c Config) accepts() bool { return len(c.Peers) > 0 && c.Peers[0] < c.Rank }
