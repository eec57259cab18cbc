package tcp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// TestLosePeer: a peer reported lost by someone else (a control plane)
// fails a Recv already waiting on it and later Sends to it with
// ErrPeerLost carrying the cause, while the other peers stay usable.
func TestLosePeer(t *testing.T) {
	ts := build(t, 3, nil)
	defer func() {
		for _, tr := range ts {
			_ = tr.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tag := transport.Tag{Group: 77, Seq: 1}
	got := make(chan error, 1)
	go func() { got <- ts[0].Recv(ctx, 1, tag, make([]byte, 8)) }()
	cause := errors.New("endpoint terminated")
	time.Sleep(10 * time.Millisecond) // let the Recv post; the test holds either way
	ts[0].LosePeer(1, cause)
	for _, err := range []error{<-got, ts[0].Send(ctx, 1, tag, []byte{1})} {
		if !errors.Is(err, transport.ErrPeerLost) || !errors.Is(err, cause) {
			t.Fatalf("got %v, want ErrPeerLost wrapping the cause", err)
		}
	}
	ts[0].LosePeer(1, nil) // already lost: ignored
	ts[0].LosePeer(0, nil) // itself: ignored
	ts[0].LosePeer(9, nil) // unknown: ignored
	done := make(chan error, 1)
	go func() { done <- ts[2].Recv(ctx, 0, tag, make([]byte, 3)) }()
	if err := ts[0].Send(ctx, 2, tag, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

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
