package msg_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// TestSetupNormalize: zero settings take the shared defaults, Peers come
// back sorted (every other rank where nil), and each bad setting is
// refused with ErrBadArgument.
func TestSetupNormalize(t *testing.T) {
	secret := make([]byte, msg.MinSecret)
	c, err := msg.Setup{Rank: 1, Size: 3, Secret: secret}.Normalize("x", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Peers, []int{0, 2}) || c.EagerMax != msg.DefaultEagerMax ||
		c.MaxBuffered != msg.DefaultMaxBuffered || c.PeerTimeout != msg.DefaultPeerTimeout ||
		c.HeartbeatInterval != msg.DefaultHeartbeatInterval || c.HandshakeTimeout != msg.DefaultHandshakeTimeout {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = msg.Setup{Rank: 0, Size: 4, Secret: secret, Peers: []int{3, 1}, PeerTimeout: time.Second}.Normalize("x", 1<<30)
	if err != nil || !slices.Equal(c.Peers, []int{1, 3}) || c.HeartbeatInterval != time.Second/4 {
		t.Fatalf("peers %v, heartbeat %v, err %v", c.Peers, c.HeartbeatInterval, err)
	}
	good := msg.Setup{Rank: 0, Size: 2, Secret: secret}
	for name, edit := range map[string]func(*msg.Setup){
		"rank":      func(c *msg.Setup) { c.Rank = 2 },
		"secret":    func(c *msg.Setup) { c.Secret = secret[:msg.MinSecret-1] },
		"self":      func(c *msg.Setup) { c.Peers = []int{0} },
		"twice":     func(c *msg.Setup) { c.Size, c.Peers = 3, []int{1, 1} },
		"eager":     func(c *msg.Setup) { c.EagerMax = -1 },
		"window":    func(c *msg.Setup) { c.MaxBuffered = 1<<30 + 1 },
		"heartbeat": func(c *msg.Setup) { c.PeerTimeout, c.HeartbeatInterval = time.Second, time.Second },
		"handshake": func(c *msg.Setup) { c.HandshakeTimeout = -1 },
	} {
		c := good
		edit(&c)
		if _, err := c.Normalize("x", 1<<30); !errors.Is(err, transport.ErrBadArgument) {
			t.Errorf("%s: %v, want ErrBadArgument", name, err)
		}
	}
}
