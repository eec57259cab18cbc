package collectives_test

import (
	"errors"
	"testing"

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// New builds a group on any transport with an id the ranks agreed on; the
// ops run on it as on Local's.
func TestNewOnAnyTransport(t *testing.T) {
	w := newWorld(t, 2)
	ts := transport.NewLocal(2)
	gs := make([]*collectives.Group, 2)
	for r := range 2 {
		g, err := collectives.New(w.rt, ts[r], 77)
		if err != nil {
			t.Fatal(err)
		}
		if g.ID() != 77 || g.Rank() != r || g.Size() != 2 {
			t.Fatalf("rank %d: id %d rank %d size %d", r, g.ID(), g.Rank(), g.Size())
		}
		gs[r] = g
	}
	w.groups = gs
	runAllReduce(t, w, gpu.Int32, collectives.Sum, 1000)
	if _, err := collectives.New(w.rt, nil, 1); !errors.Is(err, collectives.ErrBadArgument) {
		t.Fatalf("nil transport: %v", err)
	}
	if _, err := collectives.New(nil, ts[0], 1); !errors.Is(err, collectives.ErrBadArgument) {
		t.Fatalf("nil runtime: %v", err)
	}
}
