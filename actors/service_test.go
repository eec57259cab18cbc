package actors_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/choreo-gpu/choreo/actors"
)

// recorder is a service that notes its name when it closes.
type recorder struct {
	name   string
	mu     *sync.Mutex
	closed *[]string
}

func (r recorder) Close(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.closed = append(*r.closed, r.name)
	return nil
}

// TestCloseLastServicesCloseAfterTheOthers: what was adopted closes
// first, then the services in the order they attached, except one whose
// key says CloseLast (remoting): it closes after every other service, even
// one attached after it. Lookup finds only what is attached.
func TestCloseLastServicesCloseAfterTheOthers(t *testing.T) {
	rt, err := actors.NewRuntime()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var closed []string
	mk := func(name string) func(*actors.Runtime) (recorder, error) {
		return func(*actors.Runtime) (recorder, error) { return recorder{name, &mu, &closed}, nil }
	}
	first := &actors.ServiceKey{Name: "first"}
	last := &actors.ServiceKey{Name: "last", CloseLast: true}
	later := &actors.ServiceKey{Name: "later"}
	if _, ok := actors.Lookup[recorder](rt, last); ok {
		t.Fatal("Lookup found a service before it was attached")
	}
	for _, k := range []*actors.ServiceKey{first, last, later} {
		if _, err := actors.Service(rt, k, mk(k.Name)); err != nil {
			t.Fatal(err)
		}
	}
	if r, ok := actors.Lookup[recorder](rt, last); !ok || r.name != "last" {
		t.Fatalf("Lookup: %v %v, want the last service", r, ok)
	}
	if err := rt.Adopt("adopted", recorder{"adopted", &mu, &closed}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"adopted", "first", "later", "last"}; !slices.Equal(closed, want) {
		t.Fatalf("closed %v, want %v", closed, want)
	}
}
