package transport_test

import (
	"context"
	"errors"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// TestLocalRetireFailsWindows: an in-process rank's Retire fails the
// group's windows on every rank (an Expose waiting for the others, and
// later ones), with ErrStale; another group's windows work.
func TestLocalRetireFailsWindows(t *testing.T) {
	ts := transport.NewLocal(2)
	defer func() {
		for _, tr := range ts {
			_ = tr.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), transporttest.Long)
	defer cancel()
	pa := func(r int) transport.PeerAccess { return ts[r].(transport.PeerAccess) }
	old := transport.Tag{Group: 7, Seq: 1}
	waiting := transporttest.Async(func() error {
		w, err := pa(0).Expose(ctx, old, make([]byte, 4))
		if err == nil {
			w.Leave()
		}
		return err
	})
	ts[1].(transport.Retirer).Retire(7)
	if err := transporttest.Await(t, waiting, transporttest.Prompt, "expose"); !errors.Is(err, transport.ErrStale) {
		t.Fatalf("an Expose waiting at the Retire: %v; want ErrStale", err)
	}
	if _, err := pa(1).Expose(ctx, old.WithStep(1), nil); !errors.Is(err, transport.ErrStale) {
		t.Fatalf("an Expose after the Retire: %v; want ErrStale", err)
	}
	fresh := transport.Tag{Group: 8, Seq: 1}
	other := transporttest.Async(func() error {
		w, err := pa(0).Expose(ctx, fresh)
		if err == nil {
			w.Leave()
		}
		return err
	})
	w, err := pa(1).Expose(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	w.Leave()
	if err := transporttest.Await(t, other, transporttest.Long, "expose of another group"); err != nil {
		t.Fatal(err)
	}
}
