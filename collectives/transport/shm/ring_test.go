package shm

import (
	"context"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// A sender whose ring is full waits for the receiver to make room, and an
// idle receiver (no call in flight) makes it within its heartbeat: its
// pump runs briefly at each one.
func TestFullRingIdleReceiver(t *testing.T) {
	ts := build(t, 2, func(c *Config) {
		c.SlotSize = 4096
		c.Slots = 2
		c.PeerTimeout = 400 * time.Millisecond
	})
	defer closeAll(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	time.Sleep(50 * time.Millisecond) // the pumps ConnectLinks started have ended
	const k = 10                      // eager messages: five times the ring
	for i := range k {
		if err := ts[0].Send(ctx, 1, transport.Tag{Group: 1, Seq: uint64(i)}, []byte{byte(i)}); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	for i := range k {
		got := []byte{0xff}
		if err := ts[1].Recv(ctx, 0, transport.Tag{Group: 1, Seq: uint64(i)}, got); err != nil || got[0] != byte(i) {
			t.Fatalf("message %d: %v %v", i, err, got)
		}
	}
}
