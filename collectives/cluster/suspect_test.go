package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/actors/remoting"
)

// envSuspectPeer carries a suspectPeer's plan to its process.
const envSuspectPeer = "CHOREO_CLUSTER_SUSPECT_PEER"

// suspectPeer is a peer rank in a process of its own (two remotings in one
// process race on gRPC's global logger): its remoting starts at once, its
// Node (rank 0 of 2, watching Watcher as rank 1) NodeAfter later, or never
// when NodeAfter is negative, and closes CloseAfter after that. It prints
// "ADDR <control address>", "NODE" and "CLOSED" as it goes.
type suspectPeer struct {
	Watcher               string
	NodeAfter, CloseAfter time.Duration
}

// TestSuspectPeerProcess is a suspectPeer's process.
func TestSuspectPeerProcess(t *testing.T) {
	raw := os.Getenv(envSuspectPeer)
	if raw == "" {
		t.Skip("run by the suspicion tests as a peer's process")
	}
	var sp suspectPeer
	if err := json.Unmarshal([]byte(raw), &sp); err != nil {
		t.Fatal(err)
	}
	rt, err := remoteRuntime(remoting.Config{Addr: "127.0.0.1:0", Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Close() }()
	addr := remoting.Of(rt).Address()
	fmt.Printf("ADDR %s\n", addr)
	if sp.NodeAfter < 0 {
		time.Sleep(time.Minute)
		return
	}
	time.Sleep(sp.NodeAfter)
	n, err := Start(rt, Spec{Rank: 0, Size: 2, Run: "r", Coordinator: addr})
	if err != nil {
		t.Fatal(err)
	}
	n.Watch(Roster{Group: 7, Members: []Member{{Rank: 0, Control: addr}, {Rank: 1, Control: sp.Watcher}}}, nil)
	fmt.Println("NODE")
	time.Sleep(sp.CloseAfter)
	n.Close("test over")
	fmt.Println("CLOSED")
	time.Sleep(time.Minute)
}

// startSuspectPeer starts a suspectPeer process and returns its control
// address and its later output lines.
func startSuspectPeer(t *testing.T, sp suspectPeer) (string, <-chan string) {
	t.Helper()
	_, lines := startChild(t, "TestSuspectPeerProcess", envSuspectPeer, sp)
	for l := range lines {
		if addr, ok := strings.CutPrefix(l, "ADDR "); ok {
			return addr, lines
		}
	}
	t.Fatal("the peer process ended before it printed its address")
	return "", nil
}

// await waits (bounded) for line on lines, failing t if a loss comes
// first.
func await(t *testing.T, lines <-chan string, line string, lost <-chan error) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the peer process ended before %q", line)
			}
			if l == line {
				return
			}
		case cause := <-lost:
			t.Fatalf("lost before the peer printed %q: %v", line, cause)
		case <-deadline:
			t.Fatalf("no %q from the peer within a minute", line)
		}
	}
}

// sharedControl is the control address of the runtime watchOne's Node
// runs on.
func sharedControl(t *testing.T) string { return remoting.Of(sharedRuntime(t)).Address() }

// watchOne starts a Node (rank 1 of 2, peer timeout pt) watching rank 0 at
// addr, and returns the channel its losses arrive on.
func watchOne(t *testing.T, addr string, pt time.Duration) <-chan error {
	t.Helper()
	rt := sharedRuntime(t)
	n, err := Start(rt, Spec{Rank: 1, Size: 2, Run: "r", Coordinator: addr, PeerTimeout: pt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close("test over") })
	lost := make(chan error, 2)
	n.Watch(Roster{Group: 7, Members: []Member{{Rank: 0, Control: addr}, {Rank: 1, Control: n.Control()}}},
		func(rank int, cause error) { lost <- cause })
	return lost
}

// A watched peer whose Node is not there while its process answers (a
// watch that arrived before the Node, or one the remoting dropped while
// its first connect was being retried, as on a loaded host) is watched
// again and kept; once its Node is there and leaves, it is lost.
func TestWatchedPeerNodeLateKept(t *testing.T) {
	addr, lines := startSuspectPeer(t, suspectPeer{Watcher: sharedControl(t), NodeAfter: 1500 * time.Millisecond, CloseAfter: 3 * time.Second})
	lost := watchOne(t, addr, 10*time.Second)
	await(t, lines, "NODE", lost)
	await(t, lines, "CLOSED", lost)
	select {
	case cause := <-lost:
		if !strings.Contains(cause.Error(), "rank 0's node") || !strings.Contains(cause.Error(), "it left: test over") {
			t.Errorf("cause %v does not say rank 0's node left", cause)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a peer whose Node left was not lost")
	}
}

// A watched peer whose Node is never there (its process answers) is lost
// when that has gone on for the peer timeout, not before.
func TestWatchedPeerNodeAbsentLostAtPeerTimeout(t *testing.T) {
	const pt = 3 * time.Second
	addr, _ := startSuspectPeer(t, suspectPeer{Watcher: sharedControl(t), NodeAfter: -1})
	start := time.Now()
	lost := watchOne(t, addr, pt)
	select {
	case cause := <-lost:
		if at := time.Since(start); at < pt {
			t.Fatalf("lost at %v, before the peer timeout %v: %v", at, pt, cause)
		}
		if !strings.Contains(cause.Error(), "rank 0's node") || !strings.Contains(cause.Error(), "(for ") {
			t.Errorf("cause %v does not say for how long rank 0's node was missing", cause)
		}
		t.Logf("lost %v after the watch: %v", time.Since(start).Round(time.Millisecond), cause)
	case <-time.After(60 * time.Second):
		t.Fatal("a peer whose Node was never there was never lost")
	}
}

// The twin: a watched peer whose address refuses connections (its process
// is gone) is lost long before the peer timeout.
func TestWatchedPeerGoneLostAtOnce(t *testing.T) {
	const pt = 30 * time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	start := time.Now()
	lost := watchOne(t, addr, pt)
	select {
	case cause := <-lost:
		if !strings.Contains(cause.Error(), "refuses connections") {
			t.Errorf("cause %v does not say the address refuses connections", cause)
		}
		t.Logf("lost %v after the watch: %v", time.Since(start).Round(time.Millisecond), cause)
	case <-time.After(pt / 2):
		t.Fatalf("a peer whose address refuses connections was not lost within %v", pt/2)
	}
}
