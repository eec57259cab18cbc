package cluster

import (
	"net"
	"strings"
	"testing"
	"time"
)

// TestProbes: a peer whose control address refuses connections is
// reported once; a listening peer (whether or not it ever accepts: a
// paused process's kernel still completes the dial) never is; close ends
// the probes.
func TestProbes(t *testing.T) {
	alive, err := net.Listen("tcp", "127.0.0.1:0") // never accepts, as a paused process
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = alive.Close() }()
	gone := freeAddr(t)
	roster := Roster{Members: []Member{{Rank: 0, Control: "self"}, {Rank: 1, Control: alive.Addr().String()}, {Rank: 2, Control: gone}}}
	lost := make(chan string, 4)
	p := startProbes(roster, 0, func(rank int, cause error) { lost <- cause.Error() })
	select {
	case l := <-lost:
		if !strings.Contains(l, "rank 2's address") {
			t.Fatalf("lost %s, want rank 2", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the refusing peer was not reported")
	}
	time.Sleep(5 * probeEvery)
	p.close()
	select {
	case l := <-lost:
		t.Fatalf("also lost: %s", l)
	default:
	}
}
