package shm

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// TrySend sends what fits EagerMax, the receiver's window and a free slot
// at once and leaves the rest unsent (false, nil), so that the caller can
// Send it; a bad peer or a done context fails it like Send.
func TestTrySend(t *testing.T) {
	ts := build(t, 2, func(c *Config) {
		c.EagerMax = 1024
		c.MaxBuffered = 4096
		c.SlotSize = 4096
		c.Slots = 8
	})
	defer closeAll(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tag := func(i int) transport.Tag { return transport.Tag{Group: 1, Seq: uint64(i)} }
	msg := bytes.Repeat([]byte{7}, 1000)

	// The window holds three messages of 1000+64 bytes, not four.
	for i := range 3 {
		if done, err := ts[0].TrySend(ctx, 1, tag(i), msg); !done || err != nil {
			t.Fatalf("message %d: TrySend = %v, %v; want true, nil", i, done, err)
		}
	}
	if done, err := ts[0].TrySend(ctx, 1, tag(3), msg); done || err != nil {
		t.Fatalf("past the window: TrySend = %v, %v; want false, nil", done, err)
	}
	if done, err := ts[0].TrySend(ctx, 1, tag(4), make([]byte, 1025)); done || err != nil {
		t.Fatalf("over EagerMax: TrySend = %v, %v; want false, nil", done, err)
	}
	if done, err := ts[0].TrySend(ctx, 0, tag(5), msg); !done || !errors.Is(err, transport.ErrBadPeer) {
		t.Fatalf("to itself: TrySend = %v, %v; want true, ErrBadPeer", done, err)
	}
	gone, stop := context.WithCancel(ctx)
	stop()
	if done, err := ts[0].TrySend(gone, 1, tag(6), msg); !done || !errors.Is(err, context.Canceled) {
		t.Fatalf("done context: TrySend = %v, %v; want true, Canceled", done, err)
	}

	// What TrySend sent arrives; what it did not goes by Send.
	sent := make(chan error, 1)
	go func() { sent <- ts[0].Send(ctx, 1, tag(3), msg) }()
	for i := range 4 {
		got := make([]byte, len(msg))
		if err := ts[1].Recv(ctx, 0, tag(i), got); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("message %d: wrong bytes", i)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

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
	time.Sleep(50 * time.Millisecond) // the pumps Connect started have ended
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
