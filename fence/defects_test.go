package fence_test

import (
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/internal/testenv"
)

// panicky is a Guarded whose Fail panics.
type panicky struct{ called chan struct{} }

func (p panicky) Fail(error) {
	close(p.called)
	panic("guarded output panicked")
}

// D7: a Guarded.Fail that panics neither kills the process nor wedges the
// fence: the release completes, GPU waits pass, and the manager and the
// runtime still close.
func TestPanickingGuardDoesNotWedge(t *testing.T) {
	r := newRig(t)
	f, err := testenv.Fences(t, r.rt).New(r.dev)
	if err != nil {
		t.Fatal(err)
	}
	p := panicky{make(chan struct{})}
	ev, err := f.WaitGPU(r.s, p)
	if err != nil {
		t.Fatal(err)
	}
	f.Fail(errors.New("cause"))
	<-p.called
	if err := ev.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
		t.Fatalf("the GPU wait did not pass: %v", err)
	}
	g, err := testenv.Fences(t, r.rt).New(r.dev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WaitGPU(r.s, panicky{make(chan struct{})}); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { done <- testenv.Fences(t, r.rt).ReleaseAll(errors.New("all")) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ReleaseAll blocked after a panicking guard")
	}
	closed := make(chan error, 1)
	go func() { closed <- r.rt.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the runtime did not close after a panicking guard")
	}
}
