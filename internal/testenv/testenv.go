// Package testenv gives tests a runtime and a device of the backend picked
// by the CHOREO_BACKEND environment variable ("sim" by default; "sim-staged"
// for a sim whose device memory the CPU cannot see, as on a discrete GPU;
// "cuda" on a machine with an NVIDIA GPU), so the whole suite runs against
// any backend, and the set-up the test packages share: bounded contexts,
// GPU streams, fence managers, choreotest Recorders; and Full and Sliced,
// which keep the plain run of a long matrix to a representative slice
// unless CHOREO_TEST_FULL=1 asks for all of it. It imports streams,
// fence and choreotest (hence collectives), so only external test packages
// (package x_test) of those can use it.
package testenv

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	_ "github.com/choreo-gpu/choreo/gpu/cuda" // CHOREO_BACKEND=cuda on an NVIDIA machine
	_ "github.com/choreo-gpu/choreo/gpu/sim"  // the default backend, and sim-staged
	"github.com/choreo-gpu/choreo/streams"
)

// Backend is the backend name tests use.
func Backend() string {
	if b := os.Getenv("CHOREO_BACKEND"); b != "" {
		return b
	}
	return "sim"
}

// Device opens the test backend's device and closes it when the test ends.
// A backend that cannot open fails the test (it was asked for by name).
func Device(t testing.TB) gpu.Device {
	t.Helper()
	dev, err := gpu.Open(Backend())
	if err != nil {
		t.Fatalf("open backend %q: %v", Backend(), err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	return dev
}

// Runtime starts a runtime that logs to the test log and closes it when the
// test ends (before the device closes). CHOREO_TEST_LOG=1 sends the
// runtime's log to the test log.
func Runtime(t testing.TB, opts ...actors.Option) *actors.Runtime {
	t.Helper()
	if os.Getenv("CHOREO_TEST_LOG") != "" {
		// Off by default: a log line after the test ended would panic.
		opts = append([]actors.Option{actors.WithLogger(zaptest.NewLogger(t))}, opts...)
	}
	rt, err := actors.NewRuntime(opts...)
	if err != nil {
		t.Fatalf("new runtime: %v", err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("close runtime: %v", err)
		}
	})
	return rt
}

// Ctx returns a context that ends after d or when the test ends.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Stream starts a GPU stream on dev under rt; a failure fails the test.
func Stream(t testing.TB, rt *actors.Runtime, dev gpu.Device) *streams.GPU {
	t.Helper()
	s, err := streams.NewGPU(rt, dev)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Fences is rt's fence manager; a failure to get it fails the test.
func Fences(t testing.TB, rt *actors.Runtime) *fence.Manager {
	t.Helper()
	m, err := fence.For(rt)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// DefaultComm is rt's default comm stream; a failure fails the test.
func DefaultComm(t testing.TB, rt *actors.Runtime) *streams.Comm {
	t.Helper()
	c, err := streams.DefaultComm(rt)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Hold blocks s behind a GPU-side wait until the returned func runs (or
// the test ends).
func Hold(t testing.TB, s *streams.GPU) (release func()) {
	t.Helper()
	w, err := s.Device().NewFenceWord()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue([]gpu.Command{gpu.WaitValue{Word: w, Value: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Store(gpu.StopValue) })
	return func() { w.Store(1) }
}

// NeedsRunTimeFailure skips t on backends where a queued command cannot be
// made to fail when it runs: CUDA keeps a queued command's buffers alive
// until it completes, so freeing one does not fail the command (its
// commands fail at run time only on device errors).
func NeedsRunTimeFailure(t testing.TB) {
	t.Helper()
	if strings.HasPrefix(Backend(), "cuda") {
		t.Skipf("backend %s: a queued command cannot be made to fail at run time", Backend())
	}
}

// Recv returns the next value on ch, failing t if none comes within d (a
// wait that would otherwise hang until go test's own timeout).
func Recv[T any](t testing.TB, ch <-chan T, d time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("nothing came within %v", d)
		var zero T
		return zero
	}
}
