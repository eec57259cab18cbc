package shm

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// The link conformance suite over a pair of shm links (ConnectLinks),
// with a window the ring holds whole.
func TestLinkConformance(t *testing.T) {
	transporttest.RunLink(t, func(t *testing.T) transporttest.LinkPair {
		const window = 64 << 10
		links := connectLinks(t, 2, func(c *Config) { c.MaxBuffered = window })
		return transporttest.LinkPair{A: links[0][1], B: links[1][0], Window: window}
	})
}

// ConnectLinks links a rank to the ranks in Peers only: ranks 0 and 2 of
// three pair up, rank 1 pairs with none of them.
func TestConnectLinksPeers(t *testing.T) {
	links := connectLinks(t, 3, func(c *Config) {
		c.Peers = map[int][]int{0: {2}, 1: {}, 2: {0}}[c.Rank]
	})
	defer func() {
		for _, ls := range links {
			for _, l := range ls {
				if l != nil {
					l.Close()
				}
			}
		}
	}()
	for r, ls := range links {
		for p, l := range ls {
			if want := (r == 0 && p == 2) || (r == 2 && p == 0); (l != nil) != want {
				t.Errorf("rank %d: link to rank %d: %v, want one: %v", r, p, l != nil, want)
			}
		}
	}
	self := Config{Setup: msg.Setup{Rank: 0, Size: 2, Secret: testSecret, Peers: []int{0}}}
	if _, err := ConnectLinks(context.Background(), self); err == nil {
		t.Error("a rank linked to itself")
	}
}

// connectLinks connects n ranks of a fresh run with ConnectLinks, each
// configured by tweak, and returns their links by rank.
func connectLinks(t *testing.T, n int, tweak func(*Config)) [][]msg.Link {
	t.Helper()
	needShm(t)
	run := testRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	links := make([][]msg.Link, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		cfg := Config{Setup: msg.Setup{Run: run, Rank: r, Size: n, Group: 78, Secret: testSecret}}
		tweak(&cfg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			links[r], errs[r] = ConnectLinks(ctx, cfg)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return links
}
