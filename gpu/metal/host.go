package metal

import (
	"encoding/binary"
	"math"

	"github.com/choreo-gpu/choreo/gpu"
)

// The host path: commands Metal cannot compute exactly run on the CPU, on
// the shared memory, after every earlier command of the queue completed.
// They are float64 arange/add/scale (Metal has no 64-bit float) and integer
// arange/scale with a floating-point Scalar (the sim computes those in
// float64). Float -> integer conversions truncate toward zero and saturate
// at the int64 limits, NaN giving 0, as in the sim backend.

// needsHost reports whether c runs on the CPU.
func needsHost(c gpu.Command) bool {
	switch c := c.(type) {
	case gpu.Arange:
		return c.DType == gpu.Float64 || (!c.DType.IsFloat() && !(c.Start.IsInt && c.Step.IsInt))
	case gpu.Add:
		return c.DType == gpu.Float64
	case gpu.Scale:
		return c.DType == gpu.Float64 || (!c.DType.IsFloat() && !c.Factor.IsInt)
	}
	return false
}

func getF64(b []byte, i int) float64 {
	return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
}
func putF64(b []byte, i int, v float64) { binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v)) }

// hostRun runs a command for which needsHost is true. The slices are the
// buffers' memory (dst first, then the sources as the command names them).
func hostRun(c gpu.Command, dst, a, b []byte) {
	switch c := c.(type) {
	case gpu.Arange:
		s0, s1 := c.Start.Float64(), c.Step.Float64()
		for i := range c.N {
			v := s0 + float64(i)*s1
			if c.DType == gpu.Float64 {
				putF64(dst, i, v)
			} else {
				c.DType.SetInt(dst, i, gpu.TruncSat(v))
			}
		}
	case gpu.Add:
		for i := range c.N {
			putF64(dst, i, getF64(a, i)+getF64(b, i))
		}
	case gpu.Scale:
		f := c.Factor.Float64()
		for i := range c.N {
			if c.DType == gpu.Float64 {
				putF64(dst, i, getF64(a, i)*f)
			} else {
				c.DType.SetInt(dst, i, gpu.TruncSat(float64(c.DType.Int(a, i))*f))
			}
		}
	}
}
