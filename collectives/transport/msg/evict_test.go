package msg_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// evicted fails t unless err wraps ErrEvicted (and, all its peers being
// lost, ErrPeerLost).
func evicted(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, transport.ErrEvicted) || !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("%s: %v; want ErrEvicted", what, err)
	}
}

// TestSilenceEvicts: a rank whose peer finds it silent past the peer
// timeout (its link to that peer delivers nothing) is told so: its
// pending and later calls fail with ErrEvicted, with every peer, a
// message that arrived before included; the peer that judged it sees it
// lost for its silence, and a third rank sees it lost as its links
// close; the other two work on.
func TestSilenceEvicts(t *testing.T) {
	const timeout = 600 * time.Millisecond
	g := newGroup(t, 3, transporttest.PipeConfig{},
		msg.Config{PeerTimeout: timeout, HeartbeatInterval: timeout / 6})
	ctx := ctxOf(t, transporttest.Long)
	if err := g.eps[2].Send(ctx, 1, tagOf(20, 1), []byte{1}); err != nil {
		t.Fatal(err)
	}
	exchangeOK(t, g, 2, 1, tagOf(20, 2)) // the first message has arrived too
	fromZero := transporttest.Async(func() error { return g.eps[1].Recv(ctx, 0, tagOf(20, 3), make([]byte, 1)) })
	fromTwo := transporttest.Async(func() error { return g.eps[1].Recv(ctx, 2, tagOf(20, 4), make([]byte, 1)) })
	judged := transporttest.Async(func() error { return g.eps[0].Recv(ctx, 1, tagOf(20, 5), make([]byte, 1)) })
	g.pipe(1, 0).Mute(true)

	err := transporttest.Await(t, judged, transporttest.Long, "rank 0's Recv from the silent rank")
	if !errors.Is(err, transport.ErrPeerLost) || errors.Is(err, transport.ErrEvicted) || !strings.Contains(err.Error(), "silent") {
		t.Fatalf("rank 0's Recv from the silent rank: %v; want ErrPeerLost for its silence", err)
	}
	evicted(t, transporttest.Await(t, fromZero, transporttest.Prompt, "evicted rank's Recv"), "the evicted rank's pending Recv from rank 0")
	evicted(t, transporttest.Await(t, fromTwo, transporttest.Prompt, "evicted rank's Recv"), "the evicted rank's pending Recv from rank 2")
	evicted(t, g.eps[1].Recv(ctx, 2, tagOf(20, 1), make([]byte, 1)), "the evicted rank's Recv of a message that arrived")
	evicted(t, g.eps[1].Send(ctx, 2, tagOf(20, 6), []byte{1}), "the evicted rank's Send")
	err = g.eps[2].Recv(ctx, 1, tagOf(20, 7), make([]byte, 1))
	if !errors.Is(err, transport.ErrPeerLost) || errors.Is(err, transport.ErrEvicted) {
		t.Fatalf("a third rank's Recv from the evicted rank: %v; want ErrPeerLost", err)
	}
	exchangeOK(t, g, 0, 2, tagOf(20, 8))
	exchangeOK(t, g, 2, 0, tagOf(20, 9))
	if s := g.eps[1].Stats(); s.PeersLost != 2 {
		t.Fatalf("the evicted rank's stats %+v; want both peers lost", s)
	}
}

// TestOnlySilenceEvicts is the twin of TestSilenceEvicts: a peer lost in
// any other way (LosePeer, its link ending at Close) or a silence that a
// late heartbeat saw (this process stalled) evicts no one: the rank that
// was dropped keeps working with its other peers.
func TestOnlySilenceEvicts(t *testing.T) {
	t.Run("LosePeer", func(t *testing.T) {
		g := newGroup(t, 3, transporttest.PipeConfig{}, msg.Config{})
		ctx := ctxOf(t, transporttest.Long)
		g.eps[0].LosePeer(1, errors.New("its process died"))
		err := g.eps[1].Recv(ctx, 0, tagOf(21, 1), make([]byte, 1))
		if !errors.Is(err, transport.ErrPeerLost) || errors.Is(err, transport.ErrEvicted) {
			t.Fatalf("the dropped rank's Recv from rank 0: %v; want ErrPeerLost only", err)
		}
		exchangeOK(t, g, 1, 2, tagOf(21, 2))
	})
	t.Run("Close", func(t *testing.T) {
		g := newGroup(t, 3, transporttest.PipeConfig{}, msg.Config{})
		ctx := ctxOf(t, transporttest.Long)
		_ = g.eps[0].Close()
		err := g.eps[1].Recv(ctx, 0, tagOf(22, 1), make([]byte, 1))
		if !errors.Is(err, transport.ErrPeerLost) || errors.Is(err, transport.ErrEvicted) {
			t.Fatalf("a Recv from the closed rank: %v; want ErrPeerLost only", err)
		}
		exchangeOK(t, g, 1, 2, tagOf(22, 2))
	})
	t.Run("LateTick", func(t *testing.T) {
		const hour = time.Hour
		g := newGroup(t, 2, transporttest.PipeConfig{}, msg.Config{PeerTimeout: 3 * hour, HeartbeatInterval: hour})
		g.pipe(1, 0).Mute(true)
		now := time.Now()
		g.eps[0].BeatAt(now, now.Add(4*hour)) // four hours late
		g.pipe(1, 0).Mute(false)
		exchangeOK(t, g, 1, 0, tagOf(23, 1))
		exchangeOK(t, g, 0, 1, tagOf(23, 2))
		for r, e := range g.eps {
			if s := e.Stats(); s.PeersLost != 0 {
				t.Fatalf("rank %d lost a peer after a late heartbeat: %+v", r, s)
			}
		}
	})
}

// exchangeOK sends one byte from rank s to rank d under tag and fails t
// unless it arrives.
func exchangeOK(t *testing.T, g *group, s, d int, tag transport.Tag) {
	t.Helper()
	ctx := ctxOf(t, transporttest.Long)
	sent := transporttest.Async(func() error { return g.eps[s].Send(ctx, d, tag, []byte{byte(s)}) })
	got := make([]byte, 1)
	if err := g.eps[d].Recv(ctx, s, tag, got); err != nil || got[0] != byte(s) {
		t.Fatalf("%d->%d %v: %v", s, d, tag, err)
	}
	if err := transporttest.Await(t, sent, transporttest.Long, "send"); err != nil {
		t.Fatal(err)
	}
}
