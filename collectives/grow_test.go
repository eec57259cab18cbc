package collectives_test

import (
	"context"
	"errors"
	"testing"

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// TestGrowNeedsARejoiner: an in-process world has no processes to wait
// for: its Grow fails at once, wrapping errors.ErrUnsupported, and the
// group goes on; a closed group's Grow fails too.
func TestGrowNeedsARejoiner(t *testing.T) {
	rt := testenv.Runtime(t)
	gs, err := collectives.Local(rt, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := gs[0].Grow(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("grow of a local world: %v, want ErrUnsupported", err)
	}
	if err := gs[0].Close(); err != nil {
		t.Fatal(err)
	}
	_ = gs[1].Close()
	if _, err := gs[0].Grow(ctx); err == nil {
		t.Fatal("grow of a closed group succeeded")
	}
}
