package reduce

import (
	"math"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// TestNaN: every float op yields NaN when either operand is NaN, at every
// position (vector body and tail), for every float dtype.
func TestNaN(t *testing.T) {
	for _, dt := range []gpu.DType{gpu.Float32, gpu.Float64, gpu.Float16, gpu.BFloat16} {
		for _, op := range Ops {
			for _, n := range []int{1, 17, 100} {
				for _, nanInDst := range []bool{true, false} {
					dst := make([]byte, n*dt.Size())
					src := make([]byte, n*dt.Size())
					for i := 0; i < n; i++ {
						dt.SetFloat(dst, i, 1.5)
						dt.SetFloat(src, i, -2.5)
						if i%3 == 0 {
							if nanInDst {
								dt.SetFloat(dst, i, math.NaN())
							} else {
								dt.SetFloat(src, i, math.NaN())
							}
						}
					}
					if err := Into(op, dt, dst, src); err != nil {
						t.Fatal(err)
					}
					for i := 0; i < n; i++ {
						if got := dt.Float(dst, i); math.IsNaN(got) != (i%3 == 0) {
							t.Errorf("%s %s n=%d nanInDst=%v element %d = %v", op, dt, n, nanInDst, i, got)
						}
					}
				}
			}
		}
	}
}
