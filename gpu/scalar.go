package gpu

import (
	"fmt"
	"math"

	"github.com/choreo-gpu/choreo/gpu/half"
)

// Scalar is a value for Fill, Arange and Scale, exact for both integer and
// floating-point element types.
type Scalar struct {
	F     float64
	I     int64
	IsInt bool
}

// Float makes a floating-point Scalar.
func Float(v float64) Scalar { return Scalar{F: v, I: TruncSat(v)} }

// Int makes an integer Scalar.
func Int(v int64) Scalar { return Scalar{F: float64(v), I: v, IsInt: true} }

// Float64 returns the value as a float64.
func (s Scalar) Float64() float64 {
	if s.IsInt {
		return float64(s.I)
	}
	return s.F
}

// Int64 returns the value as an int64: exact for integer Scalars, TruncSat
// for float ones. Every backend converts float scalars to integer elements
// this way, then keeps the element's low bytes (wrap-around).
func (s Scalar) Int64() int64 {
	if s.IsInt {
		return s.I
	}
	return TruncSat(s.F)
}

// Bits is the bit pattern of s as one element of dt, in the low dt.Size()
// bytes: floats rounded once to the element type (16-bit floats through
// float32, as package half does), integers as Int64 wrapped to the width.
func (s Scalar) Bits(dt DType) uint64 {
	switch dt {
	case Float32:
		return uint64(math.Float32bits(float32(s.Float64())))
	case Float64:
		return math.Float64bits(s.Float64())
	case Float16:
		return uint64(half.F16(float32(s.Float64())))
	case BFloat16:
		return uint64(half.BF16(float32(s.Float64())))
	case Int8, Uint8:
		return uint64(uint8(s.Int64()))
	case Int16:
		return uint64(uint16(s.Int64()))
	case Int32:
		return uint64(uint32(s.Int64()))
	}
	return uint64(s.Int64())
}

func (s Scalar) String() string {
	if s.IsInt {
		return fmt.Sprint(s.I)
	}
	return fmt.Sprint(s.F)
}

// TruncSat converts f to int64 by truncation toward zero, saturating at the
// int64 limits; NaN gives 0. It is the one float-to-integer rule of every
// backend's kernels.
func TruncSat(f float64) int64 {
	switch {
	case f != f:
		return 0
	case f >= 0x1p63:
		return math.MaxInt64
	case f <= -0x1p63:
		return math.MinInt64
	}
	return int64(f)
}
