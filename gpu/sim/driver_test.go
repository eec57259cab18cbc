package sim_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/sim"
)

// TestRegistry: the sim registers as "sim" with the lowest priority, so
// "auto" opens it when nothing else does; each Open gives a new device.
func TestRegistry(t *testing.T) {
	if !slices.Contains(gpu.Backends(), "sim") {
		t.Fatalf("backends %v lack sim", gpu.Backends())
	}
	if p := (sim.Driver{}).Priority(); p != 0 {
		t.Errorf("priority %d, want 0", p)
	}
	d1, err := gpu.Open("sim")
	if err != nil {
		t.Fatal(err)
	}
	defer d1.Close()
	d2, err := gpu.Open("auto")
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if d1 == d2 {
		t.Fatal("two opens returned the same device")
	}
	p := d2.Properties()
	want := gpu.Properties{Backend: "sim", Name: "choreo software GPU", MemoryBytes: sim.HostMemoryBytes(), HostVisibleDeviceMem: true}
	if p != want {
		t.Errorf("properties %+v, want %+v", p, want)
	}
}

// TestMemoryEnv: CHOREO_SIM_MEMORY_BYTES sets the memory size; a bad value
// fails Open with ErrBadArgument.
func TestMemoryEnv(t *testing.T) {
	t.Setenv(sim.MemoryEnv, "4096")
	dev, err := gpu.Open("sim")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if m := dev.Properties().MemoryBytes; m != 4096 {
		t.Errorf("memory %d, want 4096", m)
	}
	t.Setenv(sim.MemoryEnv, "lots")
	_, err = gpu.Open("sim")
	if !errors.Is(err, gpu.ErrBadArgument) {
		t.Errorf("bad %s: got %v", sim.MemoryEnv, err)
	}
}

// TestMemoryLimit: Alloc beyond the device memory fails with
// ErrOutOfMemory; Free gives the bytes back.
func TestMemoryLimit(t *testing.T) {
	dev, err := sim.New(sim.WithMemoryBytes(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	a, err := dev.Alloc(800, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Alloc(300, gpu.HostMem); !errors.Is(err, gpu.ErrOutOfMemory) {
		t.Fatalf("Alloc over the limit: %v", err)
	}
	if err := a.Free(); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Alloc(1000, gpu.HostMem); err != nil {
		t.Fatalf("Alloc after Free: %v", err)
	}
}
