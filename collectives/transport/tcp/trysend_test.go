package tcp

import (
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// TrySend sends what fits EagerMax and the receiver's window at once and
// leaves the rest unsent; a bad peer or a done context fails it like Send.
func TestTrySend(t *testing.T) {
	ts := build(t, 2, func(c *Config) {
		c.EagerMax = 1024
		c.MaxBuffered = 4096
	})
	defer closeAll(ts)
	transporttest.TrySend(t, ts[0], ts[1])
}
