package msg_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
	"go.uber.org/goleak"
)

// TestSilentPeerIsLost: a peer whose link delivers nothing any more (its
// process hangs) is lost once silent for PeerTimeout; operations with it
// fail with ErrPeerLost naming the silence.
func TestSilentPeerIsLost(t *testing.T) {
	const timeout = 600 * time.Millisecond
	g := newGroup(t, 2, transporttest.PipeConfig{},
		msg.Config{PeerTimeout: timeout, HeartbeatInterval: timeout / 6})
	ctx := ctxOf(t, transporttest.Long)
	g.pipe(1, 0).Mute(true)
	start := time.Now()
	err := g.eps[0].Recv(ctx, 1, tagOf(10, 1), make([]byte, 1))
	if !errors.Is(err, transport.ErrPeerLost) || !strings.Contains(err.Error(), "silent") {
		t.Fatalf("Recv from a silent peer: %v; want ErrPeerLost for its silence", err)
	}
	if took := time.Since(start); took < timeout {
		t.Fatalf("lost after %v, before the timeout of %v", took, timeout)
	}
}

// TestSlowPeerIsNotLost is the twin of TestSilentPeerIsLost: a peer that
// is alive but idle, and pings only as often as its own, much slower,
// heartbeat lets it (a third of the timeout), is never lost, and talks
// afterwards.
func TestSlowPeerIsNotLost(t *testing.T) {
	const timeout = 1500 * time.Millisecond
	ignore := goleak.IgnoreCurrent()
	links := transporttest.Pipes(2, transporttest.PipeConfig{})
	cfg := msg.Config{Size: 2, MaxBuffered: transporttest.DefaultPipe.Window, PeerTimeout: timeout}
	var eps [2]*msg.Endpoint
	for r, hb := range []time.Duration{timeout / 30, timeout / 3} {
		c := cfg
		c.Rank, c.HeartbeatInterval = r, hb
		e, err := msg.New(c, links[r])
		if err != nil {
			t.Fatal(err)
		}
		eps[r] = e
		defer e.Close()
	}
	time.Sleep(3 * timeout)
	ctx := ctxOf(t, transporttest.Long)
	if err := eps[1].Send(ctx, 0, tagOf(11, 1), []byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := eps[0].Recv(ctx, 1, tagOf(11, 1), make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	for r, e := range eps {
		if s := e.Stats(); s.PeersLost != 0 {
			t.Fatalf("rank %d lost its idle, slow peer: %+v", r, s)
		}
	}
	for _, e := range eps {
		_ = e.Close()
	}
	goleak.VerifyNone(t, ignore)
}

// TestLateTickJudgesNoSilence: a heartbeat that comes late (this process
// was stalled, and may not have read what its peers sent) loses no peer,
// however long the silence, and the stall counts nothing against the
// peer, which is lost only after PeerTimeout of timely heartbeats.
func TestLateTickJudgesNoSilence(t *testing.T) {
	const hour = time.Hour
	g := newGroup(t, 2, transporttest.PipeConfig{},
		msg.Config{PeerTimeout: 3 * hour, HeartbeatInterval: hour})
	g.pipe(1, 0).Mute(true)
	now := time.Now()
	g.eps[0].BeatAt(now, now.Add(4*hour)) // four hours late
	if s := g.eps[0].Stats(); s.PeersLost != 0 {
		t.Fatalf("a late heartbeat lost a peer: %+v", s)
	}
	at := now.Add(4 * hour)
	for i := range 3 {
		g.eps[0].BeatAt(at, at.Add(hour))
		at = at.Add(hour)
		if s := g.eps[0].Stats(); s.PeersLost != 0 {
			t.Fatalf("timely heartbeat %d, %v after the stall (timeout 3h): %+v; want no peer lost", i+1, time.Duration(i+1)*hour, s)
		}
	}
	g.eps[0].BeatAt(at, at.Add(hour/2))
	if s := g.eps[0].Stats(); s.PeersLost != 1 {
		t.Fatalf("a timely heartbeat 3.5 hours after the stall, with the peer silent all along: %+v; want the peer lost", s)
	}
}

// beatHours runs rank e's heartbeat once an hour after at, hours times,
// and returns the time of the last.
func beatHours(e *msg.Endpoint, at time.Time, hours int) time.Time {
	for range hours {
		e.BeatAt(at, at.Add(time.Hour))
		at = at.Add(time.Hour)
	}
	return at
}

// TestPeerNotYetHeardHasStartTimeout: a peer this rank has not heard since
// its Endpoint started (it may still be connecting to its other peers) is
// lost only after StartTimeout, not after PeerTimeout.
func TestPeerNotYetHeardHasStartTimeout(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	links := transporttest.Pipes(2, transporttest.PipeConfig{})
	transporttest.AsPipe(links[1][0]).Mute(true) // rank 1 says nothing, not even as it starts
	cfg := msg.Config{Size: 2, MaxBuffered: transporttest.DefaultPipe.Window,
		PeerTimeout: 3 * time.Hour, StartTimeout: 10 * time.Hour, HeartbeatInterval: time.Hour}
	var eps [2]*msg.Endpoint
	for r := range eps {
		c := cfg
		c.Rank = r
		e, err := msg.New(c, links[r])
		if err != nil {
			t.Fatal(err)
		}
		eps[r] = e
	}
	defer func() {
		for _, e := range eps {
			_ = e.Close()
		}
		goleak.VerifyNone(t, ignore)
	}()
	at := beatHours(eps[0], time.Now(), 10)
	if s := eps[0].Stats(); s.PeersLost != 0 {
		t.Fatalf("a peer not heard yet, silent 10 h of a 10 h start timeout (peer timeout 3 h): %+v; want it kept", s)
	}
	beatHours(eps[0], at, 1)
	if s := eps[0].Stats(); s.PeersLost != 1 {
		t.Fatalf("a peer not heard yet, silent 11 h of a 10 h start timeout: %+v; want it lost", s)
	}
}

// TestPeerHeardHasPeerTimeout is the twin: once heard, a peer that falls
// silent is lost after PeerTimeout, whatever StartTimeout.
func TestPeerHeardHasPeerTimeout(t *testing.T) {
	g := newGroup(t, 2, transporttest.PipeConfig{},
		msg.Config{PeerTimeout: 3 * time.Hour, StartTimeout: 10 * time.Hour, HeartbeatInterval: time.Hour})
	at := beatHours(g.eps[0], time.Now(), 1)
	ctx := ctxOf(t, transporttest.Long)
	if err := g.eps[1].Send(ctx, 0, tagOf(12, 1), []byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := g.eps[0].Recv(ctx, 1, tagOf(12, 1), make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	g.pipe(1, 0).Mute(true)
	beatHours(g.eps[0], at, 3)
	if s := g.eps[0].Stats(); s.PeersLost != 1 {
		t.Fatalf("a peer heard once, then silent past the 3 h peer timeout: %+v; want it lost", s)
	}
}
