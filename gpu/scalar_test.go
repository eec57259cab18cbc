package gpu

import (
	"math"
	"testing"

	"github.com/choreo-gpu/choreo/gpu/half"
)

func TestScalarBits(t *testing.T) {
	cases := []struct {
		dt   DType
		v    Scalar
		want uint64
	}{
		{Float32, Float(1.5), uint64(math.Float32bits(1.5))},
		{Float64, Int(-3), math.Float64bits(-3)},
		{Float16, Float(0.1), uint64(half.F16(0.1))},
		{BFloat16, Int(3), uint64(half.BF16(3))},
		{Int8, Int(-1), 0xFF},
		{Int8, Int(300), 300 & 0xFF},
		{Uint8, Float(7.9), 7},
		{Uint8, Float(math.NaN()), 0},
		{Int16, Float(-2.5), 0xFFFE},
		{Int32, Float(-7.9), 0xFFFFFFF9},
		{Int64, Float(1e300), math.MaxInt64},
		{Int64, Int(-5), uint64(math.MaxUint64 - 4)},
	}
	for _, c := range cases {
		if got := c.v.Bits(c.dt); got != c.want {
			t.Errorf("%v.Bits(%s) = %#x, want %#x", c.v, c.dt, got, c.want)
		}
	}
}

func TestTruncSat(t *testing.T) {
	cases := []struct {
		f    float64
		want int64
	}{
		{2.9, 2}, {-2.9, -2}, {math.NaN(), 0}, {1e300, math.MaxInt64}, {-1e300, math.MinInt64},
		{math.Inf(1), math.MaxInt64}, {9223372036854775807.0, math.MaxInt64}, {-9223372036854775808.0, math.MinInt64},
	}
	for _, c := range cases {
		if got := TruncSat(c.f); got != c.want {
			t.Errorf("TruncSat(%v) = %d, want %d", c.f, got, c.want)
		}
	}
}
