package gpu_test

import (
	"errors"
	"math"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/sim"
)

// Sizes and offsets whose sums or products overflow int are refused, not
// passed on to a kernel that would index out of range.
func TestValidateRejectsOverflow(t *testing.T) {
	dev, err := sim.New()
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	a, _ := dev.Alloc(16, gpu.HostMem)
	b, _ := dev.Alloc(16, gpu.HostMem)
	for _, c := range []gpu.Command{
		gpu.Copy{Dst: a, Src: b, SrcOff: math.MaxInt, Bytes: 1},
		gpu.Copy{Dst: a, Src: b, DstOff: 1, Bytes: math.MaxInt},
		gpu.Fill{Dst: a, DType: gpu.Float64, N: math.MaxInt/8 + 2},
		gpu.Add{Dst: a, A: a, B: b, DType: gpu.Int32, N: math.MaxInt/2 + 1},
	} {
		if err := c.Validate(); !errors.Is(err, gpu.ErrBadArgument) {
			t.Errorf("%v: Validate = %v, want ErrBadArgument", c, err)
		}
	}
}
