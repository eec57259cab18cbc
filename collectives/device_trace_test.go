package collectives_test

import (
	"os"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/trace"
)

// TestDeviceTrace writes the timeline of 300 two-rank 1-element
// all-reduces on the device path to $CHOREO_DEVICE_TRACE (skipped without
// it): where a small device-resident collective spends its time, per hop.
func TestDeviceTrace(t *testing.T) {
	path := os.Getenv("CHOREO_DEVICE_TRACE")
	if path == "" {
		t.Skip("CHOREO_DEVICE_TRACE names the file to write")
	}
	for _, dp := range []collectives.DataPath{collectives.DataPathDevice, collectives.DataPathStaged} {
		tr := trace.New(trace.WithCapacity(1 << 18))
		w := newWorld(t, 2, collectives.WithDataPath(dp), collectives.WithTracer(tr))
		xs := []*array.Array{
			fromFloat64(t, w.s[0], gpu.Float32, []float64{1}, 1),
			fromFloat64(t, w.s[1], gpu.Float32, []float64{2}, 1),
		}
		for range 300 {
			ys := make([]*array.Array, 2)
			for r := range 2 {
				y, err := w.groups[r].AllReduce(w.s[r], xs[r], collectives.Sum)
				if err != nil {
					t.Fatal(err)
				}
				ys[r] = y
			}
			for _, y := range ys {
				if err := y.Wait(testenv.Ctx(t, time.Minute)); err != nil {
					t.Fatal(err)
				}
				y.Free()
			}
		}
		f, err := os.Create(path + "." + dp.String() + ".json")
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.WriteJSON(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}
