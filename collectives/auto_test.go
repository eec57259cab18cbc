package collectives_test

import (
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/choreotest"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// gpuSteps counts the GPU side's fence steps of each rank's one traced
// collective: 4 on the device path (update, wait, update, wait).
func gpuSteps(t *testing.T, tr *choreotest.Tracer, n int) []int {
	t.Helper()
	out := make([]int, n)
	for r := range n {
		evs := tr.Events(r)
		if len(evs) != 1 {
			t.Fatalf("rank %d: %d trace events, want 1", r, len(evs))
		}
		for _, s := range evs[0].Steps {
			if s.Side == fence.GPUSide {
				out[r]++
			}
		}
	}
	return out
}

// TestAutoDataPath: under DataPathAuto, ranks of Local given their one
// device (WithDevice), a GPU whose memory the CPU cannot see, take the
// device path for a payload of AutoDeviceMinBytes or more and the host
// path below it; without WithDevice, or on a device whose memory the CPU
// sees, the host path whatever the size. Results are right either way.
func TestAutoDataPath(t *testing.T) {
	staged := stagedDevice(t)
	visible, err := gpu.Open("sim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = visible.Close() })
	big := collectives.AutoDeviceMinBytes / 4 // float32 elements
	for _, c := range []struct {
		name   string
		dev    gpu.Device
		named  bool
		count  int
		device bool
	}{
		{"staged/named/big", staged, true, big, true},
		{"staged/named/small", staged, true, big - 1, false},
		{"staged/unnamed/big", staged, false, big, false},
		{"visible/named/big", visible, true, big, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := choreotest.NewTracer()
			opts := []collectives.Option{collectives.WithDataPath(collectives.DataPathAuto), tr.Option(), collectives.WithTimeout(30 * time.Second)}
			if c.named {
				opts = append(opts, collectives.WithDevice(c.dev))
			}
			w := newWorldOn(t, c.dev, 2, opts...)
			outs := make([]*array.Array, 2)
			for r := range 2 {
				x, err := array.Full(w.s[r], []int{c.count}, gpu.Float32, float64(r+1))
				if err != nil {
					t.Fatal(err)
				}
				if outs[r], err = w.groups[r].AllReduce(w.s[r], x, collectives.Sum); err != nil {
					t.Fatal(err)
				}
			}
			for r := range 2 {
				got := values(t, gpu.Float32, outs[r])
				if got[0] != 3 || got[c.count-1] != 3 {
					t.Fatalf("rank %d: %v ... %v, want 3", r, got[0], got[c.count-1])
				}
				if err := w.groups[r].Wait(testenv.Ctx(t, 30*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			for r, n := range gpuSteps(t, tr, 2) {
				if (n == 4) != c.device {
					t.Fatalf("rank %d: %d GPU fence steps: device path %v, want %v", r, n, n == 4, c.device)
				}
			}
		})
	}
}
