package msg_test

import (
	"context"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
	"go.uber.org/goleak"
)

// group is n endpoints over pipes, with their links.
type group struct {
	eps   []*msg.Endpoint
	links [][]msg.Link
}

// newGroup makes n endpoints over pipes of cfg and closes them when the
// test ends (then checks that no goroutine is left).
func newGroup(t *testing.T, n int, cfg transporttest.PipeConfig, base msg.Config) *group {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	eps, links, err := transporttest.PipeEndpoints(n, cfg, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, e := range eps {
			_ = e.Close()
		}
		goleak.VerifyNone(t, ignore)
	})
	return &group{eps: eps, links: links}
}

// pipe is rank i's end of the pipe to rank j.
func (g *group) pipe(i, j int) *transporttest.Pipe { return transporttest.AsPipe(g.links[i][j]) }

// noHolds waits until no pipe end counts a Hold without its Release.
func (g *group) noHolds(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(transporttest.Long)
	for i := range g.links {
		for j := range g.links[i] {
			if i == j {
				continue
			}
			for g.pipe(i, j).Holds() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("rank %d's link to %d: %d Holds never released", i, j, g.pipe(i, j).Holds())
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
}

func ctxOf(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func fill(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13) + seed
	}
	return b
}

func tagOf(group, seq uint64) transport.Tag { return transport.Tag{Group: group, Seq: seq} }
