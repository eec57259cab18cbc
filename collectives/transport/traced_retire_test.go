package transport_test

import (
	"context"
	"errors"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/trace"
)

// retirerOnly is a transport that is a Retirer without PeerAccess.
type retirerOnly struct {
	transport.Transport
	transport.Retirer
}

// TestTracedKeepsRetirer: a traced transport is a Retirer exactly where
// the transport under it is one, with and without PeerAccess, and its
// Retire is that transport's.
func TestTracedKeepsRetirer(t *testing.T) {
	rec := trace.New(trace.WithCapacity(64))
	ts := transport.NewLocal(2)
	defer func() {
		for _, tr := range ts {
			_ = tr.Close()
		}
	}()
	cases := []struct {
		name    string
		tr      transport.Transport
		retirer bool
	}{
		{"peers", ts[0], true},
		{"retirer only", retirerOnly{ts[0], ts[0].(transport.Retirer)}, true},
		{"opaque", opaque{ts[0]}, false},
	}
	for i, c := range cases {
		traced := transport.Traced(c.tr, rec.Rank(0))
		r, ok := traced.(transport.Retirer)
		if ok != c.retirer {
			t.Fatalf("%s: traced is a Retirer: %v, want %v", c.name, ok, c.retirer)
		}
		if !ok {
			continue
		}
		group := uint64(100 + i)
		r.Retire(group)
		err := ts[0].Send(context.Background(), 1, transport.Tag{Group: group}, []byte{1})
		if !errors.Is(err, transport.ErrStale) {
			t.Fatalf("%s: a Send after the traced Retire: %v; want ErrStale", c.name, err)
		}
	}
}
