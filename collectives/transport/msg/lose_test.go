package msg_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// TestLoseKeepsEagerMessages: when a peer closes, what it sent eagerly
// before stays receivable, in order; an announced message of it is gone;
// its pending and later operations fail with ErrPeerLost, its own with
// ErrClosed.
func TestLoseKeepsEagerMessages(t *testing.T) {
	g := newGroup(t, 2, transporttest.PipeConfig{}, msg.Config{})
	ctx := ctxOf(t, transporttest.Long)
	tag := tagOf(6, 1)
	for i := range 3 {
		if err := g.eps[0].Send(ctx, 1, tag, fill(10, byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	big := tagOf(6, 2)
	pending := transporttest.Async(func() error { return g.eps[0].Send(ctx, 1, big, fill(3*transporttest.DefaultPipe.EagerMax, 0)) })
	waiting := transporttest.Async(func() error { return g.eps[1].Recv(ctx, 0, tagOf(6, 3), make([]byte, 1)) })
	time.Sleep(transporttest.Short)
	_ = g.eps[0].Close()
	if err := transporttest.Await(t, pending, transporttest.Prompt, "the closing rank's Send"); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("the closing rank's Send: %v; want ErrClosed", err)
	}
	if err := transporttest.Await(t, waiting, transporttest.Prompt, "the peer's Recv"); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("the peer's Recv: %v; want ErrPeerLost", err)
	}
	for i := range 3 {
		got := make([]byte, 10)
		if err := g.eps[1].Recv(ctx, 0, tag, got); err != nil || !bytes.Equal(got, fill(10, byte(i))) {
			t.Fatalf("eager message %d after the loss: %v", i, err)
		}
	}
	for _, tg := range []transport.Tag{tag, big} {
		if err := g.eps[1].Recv(ctx, 0, tg, make([]byte, 10)); !errors.Is(err, transport.ErrPeerLost) {
			t.Fatalf("Recv of %v after the loss: %v; want ErrPeerLost", tg, err)
		}
	}
	if err := g.eps[1].Send(ctx, 0, tag, []byte{1}); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("Send after the loss: %v; want ErrPeerLost", err)
	}
	if s := g.eps[1].Stats(); s.PeersLost != 1 || s.ProtocolErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestLosePeer: a peer declared lost by the caller fails the operations
// with it at once, and later Sends to it, wrapping the cause; what arrived
// whole stays receivable; a second LosePeer, one of the rank itself or of
// an unknown rank is ignored; the other peers are untouched.
func TestLosePeer(t *testing.T) {
	g := newGroup(t, 3, transporttest.PipeConfig{}, msg.Config{})
	ctx := ctxOf(t, transporttest.Long)
	if err := g.eps[0].Send(ctx, 1, tagOf(7, 1), []byte{7}); err != nil {
		t.Fatal(err)
	}
	waiting := transporttest.Async(func() error { return g.eps[1].Recv(ctx, 0, tagOf(7, 2), make([]byte, 1)) })
	// The eager message has arrived once a message sent after it has.
	if err := g.eps[0].Send(ctx, 1, tagOf(7, 3), []byte{8}); err != nil {
		t.Fatal(err)
	}
	if err := g.eps[1].Recv(ctx, 0, tagOf(7, 3), make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("its process died")
	g.eps[1].LosePeer(0, cause)
	err := transporttest.Await(t, waiting, transporttest.Prompt, "Recv")
	if !errors.Is(err, transport.ErrPeerLost) || !errors.Is(err, cause) {
		t.Fatalf("Recv: %v; want ErrPeerLost wrapping the cause", err)
	}
	if err := g.eps[1].Send(ctx, 0, tagOf(7, 5), []byte{1}); !errors.Is(err, transport.ErrPeerLost) || !errors.Is(err, cause) {
		t.Fatalf("Send after the loss: %v; want ErrPeerLost wrapping the cause", err)
	}
	g.eps[1].LosePeer(0, nil) // already lost: ignored
	g.eps[1].LosePeer(1, nil) // itself: ignored
	g.eps[1].LosePeer(9, nil) // unknown: ignored
	got := make([]byte, 1)
	if err := g.eps[1].Recv(ctx, 0, tagOf(7, 1), got); err != nil || got[0] != 7 {
		t.Fatalf("the message that arrived before: %v", err)
	}
	if err := g.eps[1].Send(ctx, 2, tagOf(7, 4), []byte{9}); err != nil {
		t.Fatal(err)
	}
	if err := g.eps[2].Recv(ctx, 1, tagOf(7, 4), got); err != nil {
		t.Fatal(err)
	}
}

// TestProtocolErrors: a peer that hands back more window than it was
// given, or sends past this rank's window, breaks the protocol: it is
// dropped and counted; the other side sees an ordinary loss.
func TestProtocolErrors(t *testing.T) {
	t.Run("credit", func(t *testing.T) {
		g := newGroup(t, 2, transporttest.PipeConfig{}, msg.Config{})
		g.links[0][1].Consumed(1 << 40)
		protocolLoss(t, g)
	})
	t.Run("overrun", func(t *testing.T) {
		// The pipes let 4096 bytes go; rank 1 holds 1024, less than the
		// message's 1000+Overhead.
		g := newGroup(t, 2, transporttest.PipeConfig{EagerMax: 1000, Window: 4096}, msg.Config{MaxBuffered: 1024})
		ctx := ctxOf(t, transporttest.Long)
		if done, err := g.eps[0].TrySend(ctx, 1, tagOf(8, 1), make([]byte, 1000)); !done || err != nil {
			t.Fatalf("TrySend: %v %v", done, err)
		}
		protocolLoss(t, g)
	})
}

// protocolLoss checks that rank 1 dropped rank 0 for a protocol error and
// that rank 0 saw a plain loss.
func protocolLoss(t *testing.T, g *group) {
	t.Helper()
	ctx := ctxOf(t, transporttest.Long)
	err := g.eps[1].Recv(ctx, 0, tagOf(9, 9), make([]byte, 1))
	if !errors.Is(err, transport.ErrPeerLost) || !strings.Contains(err.Error(), "protocol error") {
		t.Fatalf("rank 1: %v; want the loss of rank 0 for a protocol error", err)
	}
	if err := g.eps[0].Recv(ctx, 1, tagOf(9, 9), make([]byte, 1)); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("rank 0: %v; want ErrPeerLost", err)
	}
	if s := g.eps[1].Stats(); s.ProtocolErrors != 1 || s.PeersLost != 1 {
		t.Fatalf("rank 1's stats %+v", s)
	}
	if s := g.eps[0].Stats(); s.ProtocolErrors != 0 || s.PeersLost != 1 {
		t.Fatalf("rank 0's stats %+v", s)
	}
}
