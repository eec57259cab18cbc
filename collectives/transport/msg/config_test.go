package msg_test

import (
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// TestNewRefusesBadConfig: New fails with ErrBadArgument for a rank out
// of range, links that do not fit the group, timeouts out of order and a
// link's impossible limits.
func TestNewRefusesBadConfig(t *testing.T) {
	good := msg.Config{Rank: 0, Size: 2, MaxBuffered: 4096, PeerTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond}
	cases := []struct {
		name  string
		edit  func(*msg.Config)
		links func() []msg.Link
	}{
		{"rank", func(c *msg.Config) { c.Rank = 2 }, nil},
		{"window", func(c *msg.Config) { c.MaxBuffered = msg.Overhead - 1 }, nil},
		{"heartbeat", func(c *msg.Config) { c.HeartbeatInterval = c.PeerTimeout / 2 }, nil},
		{"timeout", func(c *msg.Config) { c.PeerTimeout = 0 }, nil},
		{"self", nil, func() []msg.Link {
			a, b := transporttest.NewPipe(transporttest.PipeConfig{})
			return []msg.Link{a, b}
		}},
		{"missing", nil, func() []msg.Link { return []msg.Link{nil, nil} }},
		{"limits", nil, func() []msg.Link {
			a, _ := transporttest.NewPipe(transporttest.PipeConfig{EagerMax: -1})
			return []msg.Link{nil, a}
		}},
	}
	for _, c := range cases {
		cfg := good
		if c.edit != nil {
			c.edit(&cfg)
		}
		links := []msg.Link{nil, nil}
		if c.links != nil {
			links = c.links()
		} else {
			a, _ := transporttest.NewPipe(transporttest.PipeConfig{})
			links[1] = a
		}
		if e, err := msg.New(cfg, links); !errors.Is(err, transport.ErrBadArgument) {
			if e != nil {
				_ = e.Close()
			}
			t.Fatalf("%s: New: %v; want ErrBadArgument", c.name, err)
		}
	}
}
