package tcp

import (
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
		return asTransports(build(t, n, nil))
	})
}

// Several connections per pair, small frames and a small window: tags
// spread over connections, messages go in many chunks, and the window
// runs out (sends fall back to rendezvous).
func TestConformanceTight(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
		return asTransports(build(t, n, func(c *Config) {
			c.ConnsPerPeer = 3
			c.MaxFrame = 4096
			c.MaxBuffered = 16 << 10
			c.EagerMax = 4096
		}))
	})
}
