package actors_test

import (
	"testing"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// testenvDevice opens the test backend outside a *testing.T (the signal child).
func testenvDevice() (gpu.Device, error) { return gpu.Open(testenv.Backend()) }

// manager is rt's fence manager.
func manager(t testing.TB, rt *actors.Runtime) *fence.Manager {
	t.Helper()
	m, err := fence.For(rt)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// defaultComm is rt's default comm stream.
func defaultComm(t testing.TB, rt *actors.Runtime) *streams.Comm {
	t.Helper()
	c, err := streams.DefaultComm(rt)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
