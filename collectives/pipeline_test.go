package collectives_test

import (
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// stagedDevice is the test backend's device if the CPU cannot see its
// device memory (cuda, sim-staged), else a sim-staged one: large staged
// all-reduces run as a pipeline of parts, which only staging does.
func stagedDevice(t *testing.T) gpu.Device {
	dev := testenv.Device(t)
	if !dev.Properties().HostVisibleDeviceMem {
		return dev
	}
	dev, err := gpu.Open("sim-staged")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	return dev
}

// TestStagedAllReduceInParts: staged all-reduces of 2 to 4 pipeline parts
// (with an uneven last part), out of place and donated, give the
// reference result on every rank, and their fence steps show the parts:
// per part, the GPU's input update and the CPU's wait, the CPU's output
// update and the GPU's wait.
func TestStagedAllReduceInParts(t *testing.T) {
	const part = 4 << 20 // the pipeline's part size
	steps := make(chan int, 16)
	w := newWorldOn(t, stagedDevice(t), 3, collectives.WithTrace(func(e collectives.TraceEvent) {
		if e.Rank == 0 {
			steps <- len(e.Steps)
		}
	}))
	for _, c := range []struct {
		dt    gpu.DType
		count int
		parts int
		opts  []collectives.CallOption
	}{
		{gpu.Float32, 2*part/4 + 5, 2, nil},
		{gpu.Int32, 3*part/4 + 1, 3, []collectives.CallOption{collectives.Donate()}},
		{gpu.BFloat16, 4*part/2 + 3, 4, nil},
	} {
		t.Run(c.dt.String(), func(t *testing.T) {
			runAllReduce(t, w, c.dt, collectives.Sum, c.count, c.opts...)
			select {
			case n := <-steps:
				if n != 4*c.parts {
					t.Fatalf("%d fence steps, want %d (%d parts)", n, 4*c.parts, c.parts)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no trace event")
			}
		})
	}
}

// TestStagedPartsShapeMismatch (R18): ranks whose staged payloads split
// into different numbers of parts fail with ErrShapeMismatch at the first
// part, within the deadline, and the group stays usable.
func TestStagedPartsShapeMismatch(t *testing.T) {
	w := newWorldOn(t, stagedDevice(t), 2, collectives.WithTimeout(5*time.Second))
	counts := []int{2 << 20, 3 << 20} // float32: 8 MiB (2 parts) and 12 MiB (3 parts)
	outs := make([]*array.Array, 2)
	for r := range 2 {
		x, err := array.Full(w.s[r], []int{counts[r]}, gpu.Float32, 1)
		if err != nil {
			t.Fatal(err)
		}
		if outs[r], err = w.groups[r].AllReduce(w.s[r], x, collectives.Sum); err != nil {
			t.Fatalf("rank %d: launch: %v", r, err)
		}
	}
	start := time.Now()
	for r, y := range outs {
		err := y.Wait(bounded(t, 20*time.Second))
		if !errors.Is(err, collectives.ErrShapeMismatch) {
			t.Fatalf("rank %d: got %v, want ErrShapeMismatch", r, err)
		}
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("mismatch took %v to surface, want well within the 5s deadline", el)
	}
	runAllReduce(t, w, gpu.Float32, collectives.Sum, 3<<20) // still usable
}
