package metal

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

func TestNeedsHost(t *testing.T) {
	cases := []struct {
		c    gpu.Command
		want bool
	}{
		{gpu.Add{DType: gpu.Float64}, true},
		{gpu.Add{DType: gpu.Float32}, false},
		{gpu.Add{DType: gpu.Int64}, false},
		{gpu.Arange{DType: gpu.Float64, Start: gpu.Int(0), Step: gpu.Int(1)}, true},
		{gpu.Arange{DType: gpu.Int32, Start: gpu.Int(0), Step: gpu.Int(1)}, false},
		{gpu.Arange{DType: gpu.Int32, Start: gpu.Int(0), Step: gpu.Float(0.5)}, true},
		{gpu.Arange{DType: gpu.Float16, Start: gpu.Float(0.5), Step: gpu.Float(0.5)}, false},
		{gpu.Scale{DType: gpu.Int8, Factor: gpu.Int(3)}, false},
		{gpu.Scale{DType: gpu.Int8, Factor: gpu.Float(1.5)}, true},
		{gpu.Scale{DType: gpu.Float64, Factor: gpu.Int(3)}, true},
		{gpu.Fill{DType: gpu.Float64}, false},
		{gpu.Copy{}, false},
	}
	for _, c := range cases {
		if got := needsHost(c.c); got != c.want {
			t.Errorf("needsHost(%v) = %v, want %v", c.c, got, c.want)
		}
	}
}

func f64s(vs ...float64) []byte {
	b := make([]byte, 8*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return b
}

func TestHostRunFloat64(t *testing.T) {
	dst := make([]byte, 8*4)
	hostRun(gpu.Arange{DType: gpu.Float64, N: 4, Start: gpu.Float(0.5), Step: gpu.Float(0.25)}, dst, nil, nil)
	for i, want := range []float64{0.5, 0.75, 1, 1.25} {
		if got := getF64(dst, i); got != want {
			t.Errorf("arange[%d] = %v, want %v", i, got, want)
		}
	}
	a, b := f64s(1, 2, 3, 1e300), f64s(0.5, -2, 1e-300, 1e300)
	hostRun(gpu.Add{DType: gpu.Float64, N: 4}, dst, a, b)
	for i, want := range []float64{1.5, 0, 3, 2e300} {
		if got := getF64(dst, i); got != want {
			t.Errorf("add[%d] = %v, want %v", i, got, want)
		}
	}
	hostRun(gpu.Scale{DType: gpu.Float64, N: 3, Factor: gpu.Int(-2)}, dst, a, nil)
	for i, want := range []float64{-2, -4, -6} {
		if got := getF64(dst, i); got != want {
			t.Errorf("scale[%d] = %v, want %v", i, got, want)
		}
	}
	if got := getF64(dst, 3); got != 2e300 {
		t.Errorf("scale wrote past N: %v", got)
	}
}

func TestHostRunIntegerWithFloatScalars(t *testing.T) {
	dst := make([]byte, 6)
	hostRun(gpu.Arange{DType: gpu.Int8, N: 6, Start: gpu.Float(-1.5), Step: gpu.Float(0.75)}, dst, nil, nil)
	// -1.5, -0.75, 0, 0.75, 1.5, 2.25 truncated toward zero.
	for i, want := range []int8{-1, 0, 0, 0, 1, 2} {
		if got := int8(dst[i]); got != want {
			t.Errorf("int8 arange[%d] = %d, want %d", i, got, want)
		}
	}
	src := make([]byte, 2*3)
	for i, v := range []int16{100, -7, 30000} {
		binary.LittleEndian.PutUint16(src[2*i:], uint16(v))
	}
	out := make([]byte, 2*3)
	hostRun(gpu.Scale{DType: gpu.Int16, N: 3, Factor: gpu.Float(2.5)}, out, src, nil)
	// 250, -17.5 -> -17, 75000 wraps to int16.
	wrap := int64(75000)
	for i, want := range []int16{250, -17, int16(wrap)} {
		if got := int16(binary.LittleEndian.Uint16(out[2*i:])); got != want {
			t.Errorf("int16 scale[%d] = %d, want %d", i, got, want)
		}
	}
}

func TestCopyElemSize(t *testing.T) {
	cases := []struct {
		src, dst, n, want int
	}{
		{0, 0, 64, 8}, {8, 16, 24, 8}, {4, 0, 16, 4}, {0, 0, 12, 4}, {2, 6, 10, 2}, {1, 0, 8, 1}, {0, 0, 7, 1},
	}
	for _, c := range cases {
		cp := gpu.Copy{SrcOff: c.src, DstOff: c.dst, Bytes: c.n}
		got := copyElemSize(cp)
		if got != c.want {
			t.Errorf("copyElemSize(%+v) = %d, want %d", c, got, c.want)
		}
		if copyDType(got).Size() != got {
			t.Errorf("copyDType(%d) = %s", got, copyDType(got))
		}
	}
}
