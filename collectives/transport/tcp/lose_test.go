package tcp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// TestArrivedBeforeLossIsDelivered: what a peer sent before it went (its
// Send returned, then it closed) is still received, even by a Recv posted
// after the loss; a Recv for a message that never came fails.
func TestArrivedBeforeLossIsDelivered(t *testing.T) {
	ts := build(t, 2, nil)
	defer func() { _ = ts[0].Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sent, never := transport.Tag{Group: 77, Seq: 1}, transport.Tag{Group: 77, Seq: 2}
	if err := ts[1].Send(ctx, 0, sent, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	_ = ts[1].Close()
	// Rank 0 learns of the loss (the connection's end); wait until it has.
	if err := ts[0].Recv(ctx, 1, never, make([]byte, 1)); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("a message that never came: %v, want ErrPeerLost", err)
	}
	got := make([]byte, len("last words"))
	if err := ts[0].Recv(ctx, 1, sent, got); err != nil || string(got) != "last words" {
		t.Fatalf("a message that arrived before the loss: %q, %v", got, err)
	}
	if err := ts[0].Recv(ctx, 1, sent, got); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("after it: %v, want ErrPeerLost", err)
	}
}
