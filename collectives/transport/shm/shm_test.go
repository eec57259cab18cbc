package shm

import (
	"context"
	"errors"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
		return asTransports(build(t, n, nil))
	})
}

// Small slots, a short ring and a small window: messages go in many
// chunks, senders wait for room, and the window runs out (sends fall back
// to rendezvous).
func TestConformanceTight(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
		return asTransports(build(t, n, func(c *Config) {
			c.SlotSize = 4096
			c.Slots = 2
			c.MaxBuffered = 16 << 10
			c.EagerMax = 4096
		}))
	})
}

// A group of one rank connects at once, has no peer, and closes.
func TestSingleRank(t *testing.T) {
	tr, err := Connect(context.Background(), Config{Rank: 0, Size: 1, Run: testRun(t), Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Send(context.Background(), 0, transport.Tag{}, nil); !errors.Is(err, transport.ErrBadPeer) {
		t.Errorf("send to itself: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}
