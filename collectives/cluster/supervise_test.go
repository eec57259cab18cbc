package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/choreo-gpu/choreo/actors/remoting"
	"github.com/choreo-gpu/choreo/internal/errs"
	"github.com/choreo-gpu/choreo/wire"
)

// The supervision of a Node's actor: rank 0 runs here on the shared
// runtime, rank 1 in a peer process (TestNodePeerProcess) that watches
// rank 0 and prints its losses. Panics are injected through the Node's
// fault hook, which runs on the actor's goroutine before each message.

// injectPanic makes the hook of faultOn panic with its text.
type injectPanic struct{ text string }

// inspect asks the hook of faultOn for a copy of the Node's state.
type inspect struct{ reply chan<- snapshot }

// snapshot is what inspect returns.
type snapshot struct {
	formed  Roster
	watched map[string]int
	lost    map[int]error
}

// lossReport is one call of a Node's onLost.
type lossReport struct {
	rank  int
	cause error
}

// faultOn sets n's fault hook: it answers inspect, panics on injectPanic,
// and panics on any message for which extra (if set) returns a text.
func faultOn(n *Node, extra func(msg any) string) {
	f := func(msg any) {
		switch m := msg.(type) {
		case inspect:
			m.reply <- snapshot{formed: n.state.formed, watched: maps.Clone(n.state.watched), lost: maps.Clone(n.state.lost)}
			return
		case injectPanic:
			panic(m.text)
		}
		if extra != nil {
			if text := extra(msg); text != "" {
				panic(text)
			}
		}
	}
	n.fault.Store(&f)
}

// stateOf is n's state, as its actor has it.
func stateOf(t *testing.T, n *Node) snapshot {
	t.Helper()
	reply := make(chan snapshot, 1)
	n.rt.ActorSystem().Root.Send(n.pid, inspect{reply: reply})
	select {
	case s := <-reply:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not answer inspect within 10 s")
		return snapshot{}
	}
}

// pair is rank 0's Node here, formed with rank 1 in a peer process, both
// watching each other (rank 0 without probes, as a joined rank once its
// data plane is connected).
type pair struct {
	n      *Node
	roster Roster
	peer   *exec.Cmd
	lines  <-chan string // the peer's output after its ROSTER line
	lost   chan lossReport
}

// formPair forms a pair; the peer process is killed when t ends.
func formPair(t *testing.T) *pair {
	t.Helper()
	rt := sharedRuntime(t)
	coord := remoting.Of(rt).Address()
	n, err := Start(rt, Spec{Rank: 0, Size: 2, Run: "sup", Coordinator: coord, Data: "d0:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close("test over") })
	faultOn(n, nil)
	peer, lines := startPeer(t, peerSpec{Spec: Spec{Rank: 1, Size: 2, Run: "sup", Coordinator: coord, Data: "d1:1"},
		Listen: "127.0.0.1:0", Watch: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	roster, err := n.Rendezvous(ctx)
	if err != nil {
		t.Fatal(err)
	}
	awaitLine(t, lines, "ROSTER ", 30*time.Second)
	p := &pair{n: n, roster: roster, peer: peer, lines: lines, lost: make(chan lossReport, 8)}
	n.Watch(roster, func(rank int, cause error) { p.lost <- lossReport{rank, cause} })
	n.StopProbes()
	time.Sleep(300 * time.Millisecond) // let the watches reach the peers; the tests hold either way
	return p
}

// awaitRestarts waits (bounded) until n's actor was restarted want times.
func awaitRestarts(t *testing.T, n *Node, want int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for n.Restarts() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d restarts within 20 s, want %d", n.Restarts(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pingNode asks n's Node for a Pong, failing t without one.
func pingNode(t *testing.T, n *Node, nonce uint64) {
	t.Helper()
	res, err := n.rt.ActorSystem().Root.RequestFuture(n.pid, &wire.Ping{Nonce: nonce}, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	if p, ok := res.(*wire.Pong); !ok || p.GetNonce() != nonce || p.GetRank() != 0 {
		t.Fatalf("ping %d answered %v", nonce, res)
	}
}

// expectLostOnce waits (bounded) for rank's loss on p, then checks that
// no second report comes within a while.
func (p *pair) expectLostOnce(t *testing.T, rank int, since time.Time) error {
	t.Helper()
	var first lossReport
	select {
	case first = <-p.lost:
	case <-time.After(30 * time.Second):
		t.Fatalf("rank %d's loss was not reported within 30 s", rank)
	}
	if first.rank != rank || !strings.Contains(first.cause.Error(), fmt.Sprintf("rank %d", rank)) {
		t.Fatalf("reported rank %d lost (%v), want rank %d", first.rank, first.cause, rank)
	}
	t.Logf("rank %d reported lost %v after the kill: %v", rank, time.Since(since).Round(time.Millisecond), first.cause)
	select {
	case again := <-p.lost:
		t.Fatalf("a second loss report: rank %d: %v", again.rank, again.cause)
	case <-time.After(2 * time.Second):
	}
	return first.cause
}

// A panic restarts the Node's actor with its state: the same roster and
// watched peers, nothing lost; it answers pings, and a peer killed
// afterwards is reported lost once.
func TestNodeRestartKeepsStateAndDetectsLoss(t *testing.T) {
	p := formPair(t)
	before := stateOf(t, p.n)
	if !reflect.DeepEqual(before.formed, p.roster) || len(before.watched) != 1 {
		t.Fatalf("before the panic: roster %v (want %v), watched %v", before.formed, p.roster, before.watched)
	}
	root := p.n.rt.ActorSystem().Root
	root.Send(p.n.pid, injectPanic{text: "injected once"})
	awaitRestarts(t, p.n, 1)
	after := stateOf(t, p.n)
	if !reflect.DeepEqual(after.formed, p.roster) || !reflect.DeepEqual(after.watched, before.watched) || len(after.lost) != 0 {
		t.Fatalf("after the restart: roster %v, watched %v, lost %v; before: %v, %v", after.formed, after.watched,
			after.lost, before.formed, before.watched)
	}
	pingNode(t, p.n, 42)
	if err := p.n.Err(); err != nil {
		t.Fatalf("a restarted node failed: %v", err)
	}
	killed := time.Now()
	_ = p.peer.Process.Kill()
	p.expectLostOnce(t, 1, killed)
}

// The panics hit the signs of the peer's loss themselves (its watch's end
// and its connection's end, each dropped with the message that panicked):
// the restarted actor watches the peer again, and the peer is still
// reported lost once.
func TestNodeRestartOnALossSignStillLoses(t *testing.T) {
	p := formPair(t)
	var terminated, endpoint int // touched on the actor's goroutine only
	faultOn(p.n, func(msg any) string {
		switch msg.(type) {
		case *actor.Terminated:
			if terminated++; terminated == 1 {
				return "panic on the watch's end"
			}
		case endpointGone:
			if endpoint++; endpoint == 1 {
				return "panic on the connection's end"
			}
		}
		return ""
	})
	killed := time.Now()
	_ = p.peer.Process.Kill()
	p.expectLostOnce(t, 1, killed)
	if p.n.Restarts() < 1 {
		t.Fatalf("no restart: the loss's signs did not reach the node (%d restarts)", p.n.Restarts())
	}
	t.Logf("%d restarts", p.n.Restarts())
	pingNode(t, p.n, 7)
}

// The twin: restarts alone (as many as the supervisor allows) lose no
// peer, on either side, and the Node goes on answering.
func TestNodeRestartLosesNoPeer(t *testing.T) {
	p := formPair(t)
	root := p.n.rt.ActorSystem().Root
	for i := range maxRestarts {
		root.Send(p.n.pid, injectPanic{text: fmt.Sprintf("injected %d", i)})
		awaitRestarts(t, p.n, i+1)
		pingNode(t, p.n, uint64(i))
	}
	quiet := time.After(4 * time.Second)
	for done := false; !done; {
		select {
		case l := <-p.lost:
			t.Fatalf("rank %d reported lost after restarts alone: %v", l.rank, l.cause)
		case l, ok := <-p.lines:
			if !ok {
				t.Fatal("the peer process ended")
			}
			if strings.HasPrefix(l, "LOST ") {
				t.Fatalf("the peer lost a rank after rank 0's restarts alone: %s", l)
			}
		case <-quiet:
			done = true
		}
	}
	if err := p.n.Err(); err != nil {
		t.Fatalf("the node failed after %d restarts: %v", maxRestarts, err)
	}
	if s := stateOf(t, p.n); !reflect.DeepEqual(s.formed, p.roster) || len(s.lost) != 0 {
		t.Fatalf("after the restarts: roster %v, lost %v", s.formed, s.lost)
	}
}

// checkFailure checks that err is a Node's failure naming text.
func checkFailure(t *testing.T, what string, err error, text string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), text) || !strings.Contains(err.Error(), "control plane failed") ||
		!errors.Is(err, errs.ErrPeerLost) || !errors.Is(err, errs.ErrEvicted) {
		t.Fatalf("%s: %v, want the node's failure naming %q, wrapping ErrPeerLost and ErrEvicted", what, err, text)
	}
}

// A Node that panics on every message, past the restart bound, fails: its
// Err and the loss of every peer name the panic, and the peer learns that
// this rank left, naming it too.
func TestNodePanicPastBoundFailsGroup(t *testing.T) {
	const text = "panic on every message"
	p := formPair(t)
	faultOn(p.n, func(any) string { return text })
	failing := time.Now()
	p.n.rt.ActorSystem().Root.Send(p.n.pid, &wire.Ping{Nonce: 1})
	select {
	case l := <-p.lost:
		if l.rank != 1 {
			t.Fatalf("rank %d reported lost, want 1", l.rank)
		}
		checkFailure(t, "the loss's cause", l.cause, text)
		t.Logf("the group failed %v after the first panic: %v", time.Since(failing).Round(time.Millisecond), l.cause)
	case <-time.After(10 * time.Second):
		t.Fatal("the failed node's group was not failed within 10 s")
	}
	checkFailure(t, "Err", p.n.Err(), text)
	l := awaitLine(t, p.lines, "LOST 0 ", 30*time.Second)
	if !strings.Contains(l, "it left") || !strings.Contains(l, text) {
		t.Fatalf("the peer's loss of rank 0 does not say it left naming the panic: %s", l)
	}
}

// A Node that fails before Watch reports every peer lost at Watch.
func TestNodeFailedBeforeWatchReportsAtWatch(t *testing.T) {
	const text = "panic before the watch"
	rt := sharedRuntime(t)
	coord := remoting.Of(rt).Address()
	n, err := Start(rt, Spec{Rank: 0, Size: 2, Run: "sup", Coordinator: coord})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close("test over") })
	startPeer(t, peerSpec{Spec: Spec{Rank: 1, Size: 2, Run: "sup", Coordinator: coord}, Listen: "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	roster, err := n.Rendezvous(ctx)
	if err != nil {
		t.Fatal(err)
	}
	faultOn(n, func(any) string { return text })
	n.rt.ActorSystem().Root.Send(n.pid, &wire.Ping{Nonce: 1})
	deadline := time.Now().Add(10 * time.Second)
	for n.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the node did not fail within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var got []lossReport
	n.Watch(roster, func(rank int, cause error) { got = append(got, lossReport{rank, cause}) })
	if len(got) != 1 || got[0].rank != 1 {
		t.Fatalf("Watch on a failed node reported %v, want rank 1 at once", got)
	}
	checkFailure(t, "the loss's cause", got[0].cause, text)
}
