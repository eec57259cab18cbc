package gpu

import (
	"encoding/binary"
	"math"

	"github.com/choreo-gpu/choreo/gpu/half"
)

// Element access on raw little-endian element bytes, for code that works
// on one element at a time (references in tests, CPU fallbacks). Hot loops
// view the bytes as typed slices instead. Each panics if b is too short,
// or if d is of the wrong kind (Int on a float dtype, Float on an integer
// one): programmer errors.

// Int loads element i of b as an int64, sign-extended (Uint8:
// zero-extended). d must be an integer dtype.
func (d DType) Int(b []byte, i int) int64 {
	switch d {
	case Int8:
		return int64(int8(b[i]))
	case Uint8:
		return int64(b[i])
	case Int16:
		return int64(int16(binary.LittleEndian.Uint16(b[2*i:])))
	case Int32:
		return int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
	case Int64:
		return int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	panic("gpu: Int on " + d.String())
}

// SetInt stores the low d.Size() bytes of v (wrap-around) as element i of b.
func (d DType) SetInt(b []byte, i int, v int64) {
	switch d {
	case Int8, Uint8:
		b[i] = byte(v)
	case Int16:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	case Int32:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	case Int64:
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	default:
		panic("gpu: SetInt on " + d.String())
	}
}

// Float loads element i of b exactly as a float64. d must be a float dtype.
func (d DType) Float(b []byte, i int) float64 {
	switch d {
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	case Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	case Float16:
		return float64(half.Float16(binary.LittleEndian.Uint16(b[2*i:])).Float32())
	case BFloat16:
		return float64(half.BFloat16(binary.LittleEndian.Uint16(b[2*i:])).Float32())
	}
	panic("gpu: Float on " + d.String())
}

// SetFloat rounds f to d and stores it as element i of b; the 16-bit types
// round through float32, the precision every backend computes them in.
func (d DType) SetFloat(b []byte, i int, f float64) {
	switch d {
	case Float32:
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(f)))
	case Float64:
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f))
	case Float16:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(half.F16(float32(f))))
	case BFloat16:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(half.BF16(float32(f))))
	default:
		panic("gpu: SetFloat on " + d.String())
	}
}
