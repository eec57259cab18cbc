package shm

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// A wrong secret, a rank of another group, garbage and a silent client
// reach a rank's rendezvous socket while it waits for its peer: each is
// refused before any region is made, and the group then connects and
// works. Once connected, the rendezvous name is gone.
func TestHandshakeRefusals(t *testing.T) {
	needShm(t)
	run := testRun(t)
	var mu sync.Mutex
	var refused []string
	cfgOf := func(r int) Config {
		return Config{Rank: r, Size: 2, Group: 77, Run: run, Secret: testSecret, HandshakeTimeout: 300 * time.Millisecond,
			OnRefused: func(err error) {
				mu.Lock()
				refused = append(refused, err.Error())
				mu.Unlock()
			}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var t0 *Transport
	var err0 error
	connected := make(chan struct{})
	go func() {
		defer close(connected)
		t0, err0 = Connect(ctx, cfgOf(0))
	}()
	addr := refuseStrangers(t, ctx, run, cfgOf)

	t1, err := Connect(ctx, cfgOf(1))
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	<-connected
	if err0 != nil {
		t.Fatal(err0)
	}
	defer t0.Close()
	mu.Lock()
	if len(refused) != 4 || t0.Stats().Refused != 4 {
		t.Errorf("refused %d (stats %d), want 4: %q", len(refused), t0.Stats().Refused, refused)
	}
	mu.Unlock()
	sent := make(chan error, 1)
	go func() { sent <- t1.Send(ctx, 0, transport.Tag{Group: 1}, []byte{42}) }()
	got := make([]byte, 1)
	if err := t0.Recv(ctx, 1, transport.Tag{Group: 1}, got); err != nil || got[0] != 42 || <-sent != nil {
		t.Fatalf("after the refusals: %v %v", err, got)
	}
	if _, err := net.DialUnix(network, nil, addr); err == nil {
		t.Error("the rendezvous name still answers after Connect")
	}
}

// refuseStrangers dials rank 0 of run as strangers (a wrong secret, a
// wrong group, garbage, silence), checks that each is turned away with
// no region made, and returns rank 0's rendezvous address.
func refuseStrangers(t *testing.T, ctx context.Context, run string, cfgOf func(int) Config) *net.UnixAddr {
	addr := &net.UnixAddr{Name: sockName(run, 77, 0), Net: network}
	dial := func() *net.UnixConn {
		for {
			nc, err := net.DialUnix(network, nil, addr)
			if err == nil {
				_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
				return nc
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// dialHS runs a dialer's handshake as rank 1 configured by mut.
	dialHS := func(mut func(*Config)) error {
		cfg := cfgOf(1)
		mut(&cfg)
		c, err := cfg.normalize()
		if err != nil {
			t.Fatal(err)
		}
		nc := dial()
		defer nc.Close()
		mem, _, _, _, err := newTransport(c).dialHandshake(nc, 0)
		unmap(mem)
		return err
	}
	before := regions()
	if err := dialHS(func(c *Config) { c.Secret = bytes.Repeat([]byte{0x5a}, 32) }); err == nil || !strings.Contains(err.Error(), statusText[stMAC]) {
		t.Errorf("wrong secret: %v", err)
	}
	if err := dialHS(func(c *Config) { c.Group = 76 }); err == nil || !strings.Contains(err.Error(), statusText[stGroup]) {
		t.Errorf("wrong group: %v", err)
	}
	nc := dial()
	_, _ = nc.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	if n, _ := nc.Read(make([]byte, 100)); n != 0 {
		t.Errorf("garbage: %d bytes back", n)
	}
	nc.Close()
	silent := dial()
	if n, _ := silent.Read(make([]byte, 100)); n != 0 {
		t.Errorf("silent client: %d bytes back", n)
	}
	silent.Close()
	if got := regions(); got != before {
		t.Errorf("%d regions mapped after the refusals, %d before", got, before)
	}
	return addr
}

// Configurations that cannot work are refused before anything is made.
func TestConfigRefused(t *testing.T) {
	ok := Config{Rank: 0, Size: 2, Run: "r", Secret: testSecret}
	for name, mut := range map[string]func(*Config){
		"rank":      func(c *Config) { c.Rank = 2 },
		"secret":    func(c *Config) { c.Secret = c.Secret[:MinSecret-1] },
		"slot size": func(c *Config) { c.SlotSize = 1000 },
		"slots":     func(c *Config) { c.Slots = 1 },
		"region":    func(c *Config) { c.SlotSize, c.Slots = maxSlotSize, maxSlots },
		"heartbeat": func(c *Config) { c.PeerTimeout, c.HeartbeatInterval = time.Second, time.Second },
	} {
		c := ok
		mut(&c)
		if _, err := Connect(context.Background(), c); err == nil || !strings.Contains(err.Error(), "bad argument") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
