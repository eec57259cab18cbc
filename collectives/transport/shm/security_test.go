package shm

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/mesh"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// A rank that does not know the secret is refused at a rank's rendezvous
// socket before any region is made (package mesh tests the other
// strangers); the group then connects and works, and once connected the
// rendezvous name is gone.
func TestWrongSecretMakesNoRegion(t *testing.T) {
	needShm(t)
	run := testRun(t)
	var refused atomic.Int64
	cfgOf := func(r int) Config {
		return Config{Setup: msg.Setup{Run: run, Rank: r, Size: 2, Group: 77, Secret: testSecret,
			OnRefused: func(error) { refused.Add(1) }}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before := regions()
	t0c := make(chan *endpoint, 1)
	go func() {
		t0, err := connect(ctx, cfgOf(0))
		if err != nil {
			t.Error(err)
		}
		t0c <- t0
	}()
	bad := cfgOf(1)
	bad.Secret = bytes.Repeat([]byte{0x5a}, 32)
	_, err := connect(ctx, bad) // refused as soon as the handshake ends, not at ctx's end
	if !errors.Is(err, mesh.ErrAuth) || ctx.Err() != nil {
		t.Errorf("a wrong secret: %v, want mesh.ErrAuth before the deadline", err)
	}
	if got := regions(); got != before {
		t.Errorf("%d regions mapped after the refusals, %d before", got, before)
	}
	t1, err := connect(ctx, cfgOf(1))
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	t0 := <-t0c
	if t0 == nil {
		t.FailNow()
	}
	defer t0.Close()
	if refused.Load() == 0 {
		t.Error("OnRefused heard of no refusal")
	}
	sent := make(chan error, 1)
	go func() { sent <- t1.Send(ctx, 0, transport.Tag{Group: 1}, []byte{42}) }()
	got := make([]byte, 1)
	if err := t0.Recv(ctx, 1, transport.Tag{Group: 1}, got); err != nil || got[0] != 42 || <-sent != nil {
		t.Fatalf("after the refusals: %v %v", err, got)
	}
	if _, err := net.Dial(network, sockName(run, 77, 0)); err == nil {
		t.Error("the rendezvous name still answers after ConnectLinks")
	}
}

// Configurations that cannot work are refused before anything is made.
func TestConfigRefused(t *testing.T) {
	ok := Config{Setup: msg.Setup{Run: "r", Rank: 0, Size: 2, Secret: testSecret}}
	for name, mut := range map[string]func(*Config){
		"rank":      func(c *Config) { c.Rank = 2 },
		"secret":    func(c *Config) { c.Secret = c.Secret[:msg.MinSecret-1] },
		"slot size": func(c *Config) { c.SlotSize = 1000 },
		"slots":     func(c *Config) { c.Slots = 1 },
		"region":    func(c *Config) { c.SlotSize, c.Slots = maxSlotSize, maxSlots },
		"heartbeat": func(c *Config) { c.PeerTimeout, c.HeartbeatInterval = time.Second, time.Second },
	} {
		c := ok
		mut(&c)
		if _, err := connect(context.Background(), c); err == nil || !strings.Contains(err.Error(), "bad argument") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
