package cluster

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/actors/remoting"
	"github.com/choreo-gpu/choreo/internal/errs"
)

// The rendezvous's failures: each test runs one Node on this process's
// shared runtime and the other ranks as peer processes (TestNodePeerProcess).

// freeAddr is a loopback address free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// awaitLine returns the first line of lines starting with prefix, waiting
// at most d.
func awaitLine(t *testing.T, lines <-chan string, prefix string, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the peer ended without a line %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			t.Fatalf("no line %q within %v", prefix, d)
		}
	}
}

// missingNow asks rank 0's Node which ranks it still waits for.
func missingNow(n *Node) []int {
	reply := make(chan absence, 1)
	n.rt.ActorSystem().Root.Send(n.pid, askMissing{reply: reply})
	select {
	case m := <-reply:
		return slices.Sorted(slices.Values(append(m.never, m.left...)))
	case <-time.After(5 * time.Second):
		return nil
	}
}

// awaitMissing waits until rank 0's Node misses exactly want.
func awaitMissing(t *testing.T, n *Node, want []int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Equal(missingNow(n), want) {
		if time.Now().After(deadline) {
			t.Fatalf("rank 0 misses %v, want %v", missingNow(n), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRendezvousTakesAReplacement: a rank killed after its hello is
// dropped when its control connection ends, and a new process for that
// rank, at the same address, is accepted; the group forms with it.
func TestRendezvousTakesAReplacement(t *testing.T) {
	rt := sharedRuntime(t)
	coord := remoting.Of(rt).Address()
	n, err := Start(rt, Spec{Rank: 0, Size: 3, Run: "r", Coordinator: coord, Data: "d0:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close("test over")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := make(chan result, 1)
	go func() {
		r, err := n.Rendezvous(ctx)
		got <- result{r, err}
	}()
	one := peerSpec{Spec: Spec{Rank: 1, Size: 3, Run: "r", Coordinator: coord, Data: "d1:1"}, Listen: freeAddr(t)}
	first, _ := startPeer(t, one)
	awaitMissing(t, n, []int{2})
	_ = first.Process.Kill()
	awaitMissing(t, n, []int{1, 2}) // dropped when its connection ended
	second, _ := startPeer(t, one)
	_, lines := startPeer(t, peerSpec{Spec: Spec{Rank: 2, Size: 3, Run: "r", Coordinator: coord, Data: "d2:1"},
		Listen: "127.0.0.1:0"})
	awaitLine(t, lines, "ROSTER ", 30*time.Second)
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if pid := r.roster.Members[1].PID; pid != second.Process.Pid {
		t.Fatalf("rank 1 is pid %d in the roster, want the replacement's %d (the first was %d)", pid, second.Process.Pid, first.Process.Pid)
	}
}

// TestRendezvousFailsWhenRankZeroGoes: a rank that rank 0 answered fails
// its rendezvous with ErrPeerLost soon after rank 0's process dies,
// instead of waiting out its timeout.
func TestRendezvousFailsWhenRankZeroGoes(t *testing.T) {
	rt := sharedRuntime(t)
	coord := freeAddr(t)
	zero, _ := startPeer(t, peerSpec{Spec: Spec{Rank: 0, Size: 3, Run: "r", Coordinator: coord, Data: "d0:1"}, Listen: coord})
	n, err := Start(rt, Spec{Rank: 1, Size: 3, Run: "r", Coordinator: coord, Data: "d1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close("test over")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := n.Rendezvous(ctx)
		got <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); n.progress.Load() == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("rank 0 never answered")
		}
	}
	killed := time.Now()
	_ = zero.Process.Kill()
	select {
	case err := <-got:
		if !errors.Is(err, errs.ErrPeerLost) || !strings.Contains(err.Error(), "rank 0") {
			t.Fatalf("%v, want ErrPeerLost naming rank 0", err)
		}
		t.Logf("failed %v after rank 0 was killed: %v", time.Since(killed).Round(time.Millisecond), err)
	case <-time.After(20 * time.Second):
		t.Fatal("the rendezvous went on after rank 0 died")
	}
}

// TestRendezvousWrongSecretFailsFast: a rank whose secret differs from
// rank 0's fails its rendezvous at once with remoting.ErrAuth, not at its
// timeout (20 s in the peer).
func TestRendezvousWrongSecretFailsFast(t *testing.T) {
	rt := sharedRuntime(t)
	coord := remoting.Of(rt).Address()
	n, err := Start(rt, Spec{Rank: 0, Size: 2, Run: "r", Coordinator: coord, Data: "d0:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close("test over")
	started := time.Now()
	_, lines := startPeer(t, peerSpec{Spec: Spec{Rank: 1, Size: 2, Run: "r", Coordinator: coord, Data: "d1:1"},
		Listen: "127.0.0.1:0", Secret: "another secret, not the group's"})
	l := awaitLine(t, lines, "FAILED ", 15*time.Second)
	if !strings.Contains(l, remoting.ErrAuth.Error()) {
		t.Fatalf("%s, want %q", l, remoting.ErrAuth)
	}
	t.Logf("the peer failed %v after it started: %s", time.Since(started).Round(time.Millisecond), l)
	if m := missingNow(n); !slices.Contains(m, 1) {
		t.Fatalf("rank 0 misses %v, want rank 1 among them", m)
	}
}

// TestLossAfterRosterRelayed: a rank killed right after the roster is
// reported lost to a rank that never had a connection to it, by rank 0,
// at once: the report is kept until that rank watches.
func TestLossAfterRosterRelayed(t *testing.T) {
	rt := sharedRuntime(t)
	coord := freeAddr(t)
	_, zeroLines := startPeer(t, peerSpec{Spec: Spec{Rank: 0, Size: 3, Run: "r", Coordinator: coord, Data: "d0:1"},
		Listen: coord, Watch: true})
	n, err := Start(rt, Spec{Rank: 1, Size: 3, Run: "r", Coordinator: coord, Data: "d1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close("test over")
	two, twoLines := startPeer(t, peerSpec{Spec: Spec{Rank: 2, Size: 3, Run: "r", Coordinator: coord, Data: "d2:1"},
		Listen: "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	roster, err := n.Rendezvous(ctx)
	if err != nil {
		t.Fatal(err)
	}
	awaitLine(t, twoLines, "ROSTER ", 30*time.Second)
	awaitLine(t, zeroLines, "ROSTER ", 30*time.Second)
	killed := time.Now()
	_ = two.Process.Kill()
	l := awaitLine(t, zeroLines, "LOST ", 10*time.Second)
	if !strings.HasPrefix(l, "LOST 2 ") {
		t.Fatalf("rank 0: %s, want rank 2 lost", l)
	}
	// rank 0's report crosses loopback in well under this; rank 1's own
	// detectors (its probes, its watch) start only with Watch below, so the
	// first loss it reports must be the relayed one
	time.Sleep(300 * time.Millisecond)
	lost := make(chan string, 3)
	n.Watch(roster, func(rank int, cause error) { lost <- strconv.Itoa(rank) + " " + cause.Error() })
	select {
	case l := <-lost:
		if !strings.HasPrefix(l, "2 ") || !strings.Contains(l, "rank 0 reports") {
			t.Fatalf("lost %s, want rank 2 as rank 0 reported it", l)
		}
		t.Logf("rank 1 learnt it %v after the kill: %s", time.Since(killed).Round(time.Millisecond), l)
	case <-time.After(10 * time.Second):
		t.Fatal("rank 1 never learnt that rank 2 was lost")
	}
}
