package tcp

import (
	"context"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// What a rank sends eagerly to a peer (Send before the Recv, TrySend at
// once) is at most its own EagerMax, the peer's MaxFrame and the peer's
// window less a message's overhead, as the handshake told it: over three
// ranks whose limits differ, each pair's TrySend sends a message of that
// size and declines one byte more.
func TestEagerLimits(t *testing.T) {
	eager := []int{1024, msg.DefaultEagerMax, msg.DefaultEagerMax}
	frame := []int{DefaultMaxFrame, minFrame, DefaultMaxFrame}
	window := []int{msg.DefaultMaxBuffered, msg.DefaultMaxBuffered, 2048}
	ts := build(t, 3, func(c *Config) {
		c.EagerMax, c.MaxFrame, c.MaxBuffered = eager[c.Rank], frame[c.Rank], window[c.Rank]
	})
	defer closeAll(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for r := range ts {
		for p := range ts {
			if p == r {
				continue
			}
			want := min(eager[r], frame[p], window[p]-tcpOverhead)
			tag := transport.Tag{Group: 3, Seq: uint64(3*r + p)}
			if done, err := ts[r].TrySend(ctx, p, tag, make([]byte, want+1)); done || err != nil {
				t.Fatalf("rank %d to %d: %d bytes: TrySend = %v, %v; want false, nil", r, p, want+1, done, err)
			}
			if done, err := ts[r].TrySend(ctx, p, tag, make([]byte, want)); !done || err != nil {
				t.Fatalf("rank %d to %d: %d bytes: TrySend = %v, %v; want true, nil", r, p, want, done, err)
			}
			if err := ts[p].Recv(ctx, r, tag, make([]byte, want)); err != nil {
				t.Fatalf("rank %d from %d: %v", p, r, err)
			}
		}
	}
}

// The conformance suite, with the defaults and tight: several
// connections per pair, small frames and a small window, so that tags
// spread over connections, messages go in many chunks and the window runs
// out (sends fall back to rendezvous).
func TestConformance(t *testing.T) {
	transporttest.RunTight(t, group, func(c *Config) { c.ConnsPerPeer, c.MaxFrame, c.MaxBuffered, c.EagerMax = 3, 4096, 16<<10, 4096 })
}
