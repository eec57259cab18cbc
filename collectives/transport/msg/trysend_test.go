package msg_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// trySender is a transport with TrySend.
type trySender interface {
	transport.Transport
	transport.TrySender
}

// checkTrySend checks, on two ranks made with an eager limit of 1024 bytes and
// a receive window of 4096 (each message taking 64 bytes more), that
// TrySend sends what fits the limit and the window at once and leaves the
// rest unsent (false, nil), so that the caller can Send it; that a bad
// peer or a done context fails it like Send; and that what it sent arrives
// in order with what Send sent after it.
func checkTrySend(t *testing.T, from, to trySender) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tag := func(i int) transport.Tag { return transport.Tag{Group: 1, Seq: uint64(i)} }
	msg := bytes.Repeat([]byte{7}, 1000)
	dst := to.Rank()

	// The window holds three messages of 1000+64 bytes, not four.
	for i := range 3 {
		if done, err := from.TrySend(ctx, dst, tag(i), msg); !done || err != nil {
			t.Fatalf("message %d: TrySend = %v, %v; want true, nil", i, done, err)
		}
	}
	if done, err := from.TrySend(ctx, dst, tag(3), msg); done || err != nil {
		t.Fatalf("past the window: TrySend = %v, %v; want false, nil", done, err)
	}
	if done, err := from.TrySend(ctx, dst, tag(4), make([]byte, 1025)); done || err != nil {
		t.Fatalf("over EagerMax: TrySend = %v, %v; want false, nil", done, err)
	}
	if done, err := from.TrySend(ctx, from.Rank(), tag(5), msg); !done || !errors.Is(err, transport.ErrBadPeer) {
		t.Fatalf("to itself: TrySend = %v, %v; want true, ErrBadPeer", done, err)
	}
	gone, stop := context.WithCancel(ctx)
	stop()
	if done, err := from.TrySend(gone, dst, tag(6), msg); !done || !errors.Is(err, context.Canceled) {
		t.Fatalf("done context: TrySend = %v, %v; want true, Canceled", done, err)
	}

	// What TrySend sent arrives; what it did not goes by Send.
	sent := make(chan error, 1)
	go func() { sent <- from.Send(ctx, dst, tag(3), msg) }()
	for i := range 4 {
		got := make([]byte, len(msg))
		if err := to.Recv(ctx, from.Rank(), tag(i), got); err != nil {
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
