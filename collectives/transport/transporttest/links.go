package transporttest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"go.uber.org/goleak"
)

// LinkPair is the two ends of one link, rank 0's (A) and rank 1's (B),
// and each end's eager window toward the other.
type LinkPair struct {
	A, B   msg.Link
	Window int
}

// LinkFunc makes a fresh, connected but not started link pair.
type LinkFunc func(t *testing.T) LinkPair

// RunLink runs the link conformance suite: each check starts a fresh
// pair under two msg Endpoints (ranks 0 and 1) and drives the link both
// through them and by calling A's methods directly, checking what B's
// Endpoint makes of the frames: messages of a tag arrive in order, on
// every lane; Eager declines once the peer's window is spent and sends
// again once the peer consumed; aborts and pings arrive; A's Close is
// seen by B as the loss of its peer, not as a broken protocol.
func RunLink(t *testing.T, mk LinkFunc) {
	cases := []struct {
		name string
		fn   func(*testing.T, *linkRig)
	}{
		{"Order", testLinkOrder},
		{"Window", testLinkWindow},
		{"Abort", testLinkAbort},
		{"Ping", testLinkPing},
		{"Close", testLinkClose},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			c.fn(t, newLinkRig(t, mk))
		})
	}
}

// linkRig is one pair under two endpoints.
type linkRig struct {
	LinkPair
	ea, eb *msg.Endpoint
	ctx    context.Context
}

// linkConfig is the suite's endpoints' configuration: a heartbeat rare
// enough that the checks see the frames they send, not the heartbeat's.
func linkConfig(rank, window int) msg.Config {
	return msg.Config{Rank: rank, Size: 2, Name: "link", MaxBuffered: window,
		PeerTimeout: 30 * time.Second, HeartbeatInterval: 2 * time.Second}
}

func newLinkRig(t *testing.T, mk LinkFunc) *linkRig {
	lp := mk(t)
	ea, err := msg.New(linkConfig(0, lp.Window), []msg.Link{nil, lp.A})
	if err != nil {
		lp.B.Close()
		t.Fatal(err)
	}
	eb, err := msg.New(linkConfig(1, lp.Window), []msg.Link{lp.B, nil})
	if err != nil {
		_ = ea.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ea.Close()
		_ = eb.Close()
	})
	return &linkRig{LinkPair: lp, ea: ea, eb: eb, ctx: ctxLong(t)}
}

// tagsOnLanes returns a tag on each lane A uses among the first 64 steps
// (at most 8).
func tagsOnLanes(l msg.Link) []transport.Tag {
	seen := map[int]bool{}
	var tags []transport.Tag
	for s := uint32(0); s < 64 && len(tags) < 8; s++ {
		tag := transport.Tag{Group: 3, Seq: 3, Step: s}
		if lane := l.LaneOf(tag); !seen[lane] {
			seen[lane] = true
			tags = append(tags, tag)
		}
	}
	return tags
}

// testLinkOrder: on every lane, a tag's messages (eager and announced,
// sent concurrently with the other lanes') arrive whole and in order.
func testLinkOrder(t *testing.T, rig *linkRig) {
	lim := rig.A.Limits()
	sizes := []int{0, 1, lim.EagerMax, lim.EagerMax + 1, 3*lim.Chunk + 5, 17}
	tags := tagsOnLanes(rig.A)
	errc := make(chan error, 2*len(tags))
	for i, tag := range tags {
		go func() {
			for k, n := range sizes {
				if err := rig.ea.Send(rig.ctx, 1, tag, pattern(n, byte(i*16+k))); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		go func() {
			for k, n := range sizes {
				got := make([]byte, n)
				if err := rig.eb.Recv(rig.ctx, 0, tag, got); err != nil {
					errc <- err
					return
				}
				if !bytes.Equal(got, pattern(n, byte(i*16+k))) {
					errc <- errors.New("a message arrived out of order or corrupted")
					return
				}
			}
			errc <- nil
		}()
	}
	for range 2 * len(tags) {
		if err := Await(t, errc, Long, "lanes"); err != nil {
			t.Fatal(err)
		}
	}
}

// testLinkWindow: A's Eager declines once B's window is spent (nothing is
// sent), and sends again once B's Recvs consumed the messages.
func testLinkWindow(t *testing.T, rig *linkRig) {
	n := min(rig.A.Limits().EagerMax, rig.Window/4-msg.Overhead)
	if n < 1 {
		t.Skip("the link sends nothing eagerly")
	}
	tag := transport.Tag{Group: 4, Seq: 4}
	sent := 0
	for ; sent*(n+msg.Overhead) <= rig.Window; sent++ {
		done, err := rig.A.Eager(rig.ctx, tag, pattern(n, byte(sent)), true)
		if err != nil {
			t.Fatal(err)
		}
		if !done {
			break
		}
	}
	if sent == 0 || (sent+1)*(n+msg.Overhead) <= rig.Window {
		t.Fatalf("the window of %d bytes took %d messages of %d bytes", rig.Window, sent, n)
	}
	if done, _ := rig.A.Eager(rig.ctx, tag, pattern(n, 0), true); done {
		t.Fatal("Eager sent past the window")
	}
	for i := range sent {
		got := make([]byte, n)
		if err := rig.eb.Recv(rig.ctx, 0, tag, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, pattern(n, byte(i))) {
			t.Fatalf("message %d corrupted", i)
		}
	}
	deadline := time.Now().Add(Long)
	for {
		done, err := rig.A.Eager(rig.ctx, tag, pattern(n, 9), true)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no window came back within %v", Long)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := rig.eb.Recv(rig.ctx, 0, tag, make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if s := rig.eb.Stats(); s.ProtocolErrors != 0 {
		t.Fatalf("B counted %d protocol errors", s.ProtocolErrors)
	}
}

// testLinkAbort: an abort sent on A reaches B's operations of that
// collective, naming rank 0 and keeping the cause's sentinel; one sent by
// B's endpoint reaches A's.
func testLinkAbort(t *testing.T, rig *linkRig) {
	tag := transport.Tag{Group: 5, Seq: 5}
	recv := Async(func() error { return rig.eb.Recv(rig.ctx, 0, tag, make([]byte, 8)) })
	time.Sleep(Short)
	rig.A.Abort(&transport.AbortError{Origin: 0, Group: 5, Seq: 5, Cause: transport.ErrTimeout}, time.Now().UnixNano())
	err := Await(t, recv, Prompt, "B's Recv after A's abort")
	var ae *transport.AbortError
	if !errors.As(err, &ae) || ae.Origin != 0 || !errors.Is(err, transport.ErrTimeout) {
		t.Fatalf("B's Recv: %v; want an abort by rank 0 for a timeout", err)
	}
	tag2 := transport.Tag{Group: 5, Seq: 6}
	send := Async(func() error { return rig.ea.Send(rig.ctx, 1, tag2, make([]byte, 4*rig.Window)) })
	time.Sleep(Short)
	rig.eb.Abort(tag2, errors.New("from B"))
	err = Await(t, send, Prompt, "A's Send after B's abort")
	if !errors.As(err, &ae) || ae.Origin != 1 {
		t.Fatalf("A's Send: %v; want an abort by rank 1", err)
	}
}

// testLinkPing: B's link hears A's ping.
func testLinkPing(t *testing.T, rig *linkRig) {
	time.Sleep(Short)
	before := time.Now().UnixNano()
	rig.A.Ping()
	deadline := time.Now().Add(Prompt)
	for rig.B.Tick() < before {
		if time.Now().After(deadline) {
			t.Fatalf("B did not hear A's ping within %v", Prompt)
		}
		time.Sleep(time.Millisecond)
	}
}

// testLinkClose: A's Close fails B's pending operations with ErrPeerLost,
// after delivering what A sent before it; B counts a lost peer and no
// protocol error.
func testLinkClose(t *testing.T, rig *linkRig) {
	tag := transport.Tag{Group: 6, Seq: 6}
	if err := rig.ea.Send(rig.ctx, 1, tag, pattern(1, 1)); err != nil {
		t.Fatal(err)
	}
	later := transport.Tag{Group: 6, Seq: 7}
	recv := Async(func() error { return rig.eb.Recv(rig.ctx, 0, later, make([]byte, 8)) })
	time.Sleep(Short)
	_ = rig.ea.Close()
	if err := Await(t, recv, Prompt, "B's Recv after A's close"); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("B's Recv: %v; want ErrPeerLost", err)
	}
	got := make([]byte, 1)
	if err := rig.eb.Recv(rig.ctx, 0, tag, got); err != nil || got[0] != pattern(1, 1)[0] {
		t.Fatalf("the message A sent before its close: %v", err)
	}
	if s := rig.eb.Stats(); s.PeersLost != 1 || s.ProtocolErrors != 0 {
		t.Fatalf("B's stats %+v; want one peer lost, no protocol error", s)
	}
}
