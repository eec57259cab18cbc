package transport_test

import (
	"context"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
	"github.com/choreo-gpu/choreo/trace"
)

// TestTracedConformance: a traced transport keeps the contract, with and
// without PeerAccess underneath.
func TestTracedConformance(t *testing.T) {
	tr := trace.New(trace.WithCapacity(1 << 10))
	t.Run("peers", func(t *testing.T) {
		mk := func(t *testing.T, n int) []transport.Transport {
			ts := transport.NewLocal(n)
			for i := range ts {
				ts[i] = transport.Traced(ts[i], tr.Rank(i))
			}
			if _, ok := ts[0].(transport.PeerAccess); !ok {
				t.Fatal("the traced transport lost PeerAccess")
			}
			return ts
		}
		transporttest.Run(t, mk)
		t.Run("PeerAccess", func(t *testing.T) { testPeerAccess(t, mk) })
	})
	t.Run("opaque", func(t *testing.T) {
		transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
			ts := transport.NewLocal(n)
			for i := range ts {
				ts[i] = transport.Traced(opaque{ts[i]}, tr.Rank(i))
			}
			return ts
		})
	})
}

// TestTracedRecordsCalls: each Send and Recv is an async span with its
// peer, bytes and collective; a nil Recorder leaves the transport as it is.
func TestTracedRecordsCalls(t *testing.T) {
	tr := trace.New()
	ts := transport.NewLocal(2)
	if transport.Traced(ts[0], nil) != ts[0] {
		t.Error("Traced with a nil Recorder wrapped the transport")
	}
	a, b := transport.Traced(opaque{ts[0]}, tr.Rank(0)), transport.Traced(opaque{ts[1]}, tr.Rank(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tag := transport.Tag{Group: 7, Seq: 3, Step: 1}
	done := make(chan error, 1)
	go func() { done <- a.Send(ctx, 1, tag, make([]byte, 100)) }()
	if err := b.Recv(ctx, 0, tag, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for r, want := range []struct {
		name string
		peer int
	}{{"send", 1}, {"recv", 0}} {
		evs := tr.Rank(r).Events()
		if len(evs) != 1 {
			t.Fatalf("rank %d: %d events, want 1", r, len(evs))
		}
		e := evs[0]
		if e.Kind != trace.Async || e.Name != want.name || e.Peer != want.peer || e.Bytes != 100 || e.Group != 7 || e.Seq != 3 || e.Dur < 0 {
			t.Errorf("rank %d: %+v", r, e)
		}
	}
	for _, x := range []transport.Transport{a, b} {
		_ = x.Close()
	}
}

// linked names its peers' links the way a mixed group's transport does.
type linked struct{ transport.Transport }

func (linked) Via(peer int) string { return []string{"shm", "tcp"}[peer] }

// TestTracedVia: a Linker's spans say which link each call went by.
func TestTracedVia(t *testing.T) {
	tr := trace.New()
	ts := transport.NewLocal(2)
	a, b := transport.Traced(linked{opaque{ts[0]}}, tr.Rank(0)), transport.Traced(linked{opaque{ts[1]}}, tr.Rank(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tag := transport.Tag{Group: 7, Seq: 4}
	done := make(chan error, 1)
	go func() { done <- a.Send(ctx, 1, tag, make([]byte, 8)) }()
	if err := b.Recv(ctx, 0, tag, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for r, want := range []string{"tcp", "shm"} {
		if evs := tr.Rank(r).Events(); len(evs) != 1 || evs[0].Via != want {
			t.Errorf("rank %d: %+v, want via %s", r, evs, want)
		}
	}
	for _, x := range []transport.Transport{a, b} {
		_ = x.Close()
	}
}
