package tcp

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// connectLinks runs ConnectLinks on n ranks at once, rank r linking to
// peers(r), and returns each rank's links by rank.
func connectLinks(t *testing.T, n int, peers func(r int) []int, tweak func(*Config)) [][]msg.Link {
	t.Helper()
	ls, addrs := listeners(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	links := make([][]msg.Link, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		cfg := Config{Setup: msg.Setup{Addrs: addrs, Rank: r, Size: n, Group: 77, Secret: testSecret, Peers: peers(r)}}
		if tweak != nil {
			tweak(&cfg)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			links[r], errs[r] = ls[r].ConnectLinks(ctx, cfg)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			for _, ln := range links {
				for _, l := range ln {
					if l != nil {
						l.Close()
					}
				}
			}
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return links
}

// The link conformance suite over a pair of ranks joined by three
// connections (lanes) each way, with a small window.
func TestLinkConformance(t *testing.T) {
	const window = 64 << 10
	transporttest.RunLink(t, func(t *testing.T) transporttest.LinkPair {
		links := connectLinks(t, 2, func(r int) []int { return []int{1 - r} }, func(c *Config) {
			c.ConnsPerPeer, c.MaxBuffered = 3, window
		})
		return transporttest.LinkPair{A: links[0][1], B: links[1][0], Window: window}
	})
}

// A group whose pairs alternate between TCP (ranks i and j with i+j odd:
// each rank's Config.Peers) and in-memory pipes (the others), one
// msg.Endpoint per rank over both, passes the conformance suite.
func TestConformanceMixed(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
		odd := func(r int) []int {
			var out []int
			for j := range n {
				if (r+j)%2 == 1 {
					out = append(out, j)
				}
			}
			return out
		}
		links := connectLinks(t, n, odd, nil)
		pipes := transporttest.Pipes(n, transporttest.PipeConfig{Window: msg.DefaultMaxBuffered})
		ts := make([]transport.Transport, n)
		for r := range n {
			for j := range n {
				if j != r && (r+j)%2 == 0 {
					links[r][j] = pipes[r][j]
				}
			}
			e, err := msg.New(msg.Config{Rank: r, Size: n, Name: "mixed", MaxBuffered: msg.DefaultMaxBuffered,
				PeerTimeout: msg.DefaultPeerTimeout, HeartbeatInterval: msg.DefaultHeartbeatInterval}, links[r])
			if err != nil {
				t.Fatal(err)
			}
			ts[r] = e
		}
		return ts
	})
}
