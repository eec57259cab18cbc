package streams_test

import (
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// Regression tests for defects found by using the API as a user would;
// each failed before its fix.

// D3: one caller's failing command fails only that caller's commands, not
// the other callers' commands that the stream gathered into the same
// device batch (fence updates included).
func TestFailedCommandFailsOnlyItsCaller(t *testing.T) {
	dev := testenv.Device(t)
	rt := testenv.Runtime(t)
	s := testenv.Stream(t, rt, dev)
	hold, err := dev.NewFenceWord()
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Store(gpu.StopValue)
	if _, err := s.Enqueue([]gpu.Command{gpu.WaitValue{Word: hold, Value: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	src, _ := dev.Alloc(64, gpu.HostMem)
	dst, _ := dev.Alloc(64, gpu.DeviceMem)
	word, _ := dev.NewFenceWord()
	const n = 400
	const bad = n / 2
	errs := make([]chan error, n)
	for i := range n {
		errs[i] = make(chan error, 1)
		cmds := []gpu.Command{gpu.WriteValue{Word: word, Value: uint32(i + 1)}}
		if i == bad {
			cmds = []gpu.Command{gpu.Copy{Dst: dst, Src: src, Bytes: 64}, cmds[0]}
		}
		ch := errs[i]
		if _, err := s.Enqueue(cmds, func(err error) { ch <- err }); err != nil {
			t.Fatal(err)
		}
		if i == bad {
			_ = src.Free() // after the enqueue, before the copy runs: it will fail
		}
	}
	hold.Store(1)
	for i, ch := range errs {
		select {
		case err := <-ch:
			if i == bad {
				if err == nil {
					t.Errorf("the copy from a freed buffer succeeded")
				}
			} else if err != nil {
				t.Errorf("unrelated command %d failed: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("command %d never completed", i)
		}
	}
	if got := word.Load(); got != n {
		t.Fatalf("fence word %d, want %d: updates after the failed command did not run", got, n)
	}
}

// D6: a done callback that panics is recovered; the stream goes on.
func TestPanickingDoneCallback(t *testing.T) {
	dev := testenv.Device(t)
	rt := testenv.Runtime(t)
	s := testenv.Stream(t, rt, dev)
	if _, err := s.Enqueue(nil, func(error) { panic("x") }); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ev, err := s.Enqueue(nil, func(err error) { done <- err })
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stream stopped after a panicking callback")
	}
	if err := ev.Wait(testenv.Ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(testenv.Ctx(t, 5*time.Second)); err != nil && !errors.Is(err, streams.ErrClosed) {
		t.Fatal(err)
	}
}
