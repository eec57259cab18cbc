//go:build linux

package cuda

import (
	"errors"
	"strconv"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/localrank"
)

// clearPlacement unsets every variable the Driver picks its GPU by.
func clearPlacement(t *testing.T) {
	t.Helper()
	t.Setenv(DeviceEnv, "")
	for _, v := range localrank.Vars() {
		t.Setenv(v, "")
	}
}

// A malformed CHOREO_CUDA_DEVICE fails Open before the driver is asked,
// so this runs with or without a GPU.
func TestDriverOpenRefusesAMalformedDevice(t *testing.T) {
	clearPlacement(t)
	t.Setenv(DeviceEnv, "first")
	d, err := Driver{}.Open()
	if err == nil {
		_ = d.Close()
	}
	if !errors.Is(err, gpu.ErrBadArgument) || errors.Is(err, gpu.ErrNoBackend) {
		t.Fatalf("Open with %s=first: %v; want an error wrapping gpu.ErrBadArgument alone", DeviceEnv, err)
	}
}

// On a GPU machine: the local rank picks the GPU, modulo the GPUs seen,
// and CHOREO_CUDA_DEVICE beyond them is refused.
func TestDriverOpenPicksTheLocalRanksGPU(t *testing.T) {
	clearPlacement(t)
	n, err := DeviceCount()
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("skipping: no CUDA driver or GPU on this machine: %v", err)
	}
	if err != nil || n < 1 {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	t.Setenv(localrank.Env, "3")
	d, err := Driver{}.Open()
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("skipping: no usable GPU: %v", err)
	}
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if got := d.(*Device).Ordinal(); got != 3%n {
		t.Errorf("local rank 3 of %d GPU(s): ordinal %d, want %d", n, got, 3%n)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(DeviceEnv, strconv.Itoa(n))
	if d, err := (Driver{}).Open(); !errors.Is(err, gpu.ErrBadArgument) {
		if err == nil {
			_ = d.Close()
		}
		t.Errorf("Open with %s=%d of %d GPU(s): %v; want gpu.ErrBadArgument", DeviceEnv, n, n, err)
	}
}
