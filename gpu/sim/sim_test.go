package sim_test

import (
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/gputest"
	"github.com/choreo-gpu/choreo/gpu/sim"
)

func openSim(t testing.TB) gpu.Device {
	dev, err := sim.New()
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// TestConformance runs the backend conformance suite against the sim.
func TestConformance(t *testing.T) {
	gputest.Run(t, func(t *testing.T) gpu.Device { return openSim(t) })
}

// BenchmarkSim runs the backend benchmarks against the sim.
func BenchmarkSim(b *testing.B) { gputest.Bench(b, openSim) }

// TestConformanceStaged runs the suite against a sim whose device memory
// the CPU cannot see and which starts as 0xA5, not zeros (as on CUDA).
func TestConformanceStaged(t *testing.T) {
	gputest.Run(t, func(t *testing.T) gpu.Device {
		dev, err := sim.New(sim.WithStagedDeviceMemory())
		if err != nil {
			t.Fatal(err)
		}
		return dev
	})
}
