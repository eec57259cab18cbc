package gputest

import (
	"encoding/binary"
	"math"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
)

// The reference arithmetic every backend must reproduce:
//
//   - Elements are little-endian. float16 and bfloat16 are computed in
//     float32 (Arange in float64) and rounded once; float32 and float64 in
//     their own precision (Arange in float64, rounded once). Results are
//     compared with a relative tolerance (tolerance).
//   - Integer types wrap around in two's complement and are compared
//     exactly.
//   - Integer Fill/Arange with integer Scalars are exact int64 arithmetic
//     wrapped to the element width. With any float Scalar the value is
//     computed in float64 and converted by truncation toward zero,
//     saturating at the int64 limits (NaN gives 0), then wrapped.
//   - Integer Scale: an integer factor multiplies exactly (wrapping); a
//     float factor computes float64(x)*f, then converts as above.

// tolerance is the relative error allowed for a float dtype.
func tolerance(dt gpu.DType) float64 {
	switch dt {
	case gpu.Float32:
		return 1e-6
	case gpu.Float64:
		return 1e-12
	case gpu.Float16:
		return 5e-3
	case gpu.BFloat16:
		return 1e-2
	}
	return 0
}

// getInt decodes integer element i of b.
func getInt(dt gpu.DType, b []byte, i int) int64 {
	switch dt {
	case gpu.Int8:
		return int64(int8(b[i]))
	case gpu.Uint8:
		return int64(b[i])
	case gpu.Int16:
		return int64(int16(binary.LittleEndian.Uint16(b[2*i:])))
	case gpu.Int32:
		return int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
	case gpu.Int64:
		return int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	panic("gputest: getInt on " + dt.String())
}

// getFloat decodes float element i of b, exactly.
func getFloat(dt gpu.DType, b []byte, i int) float64 {
	switch dt {
	case gpu.Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	case gpu.Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	case gpu.Float16:
		return float64(half.Float16(binary.LittleEndian.Uint16(b[2*i:])).Float32())
	case gpu.BFloat16:
		return float64(half.BFloat16(binary.LittleEndian.Uint16(b[2*i:])).Float32())
	}
	panic("gputest: getFloat on " + dt.String())
}

// putFloat encodes f (rounded to dt) as element i of b.
func putFloat(dt gpu.DType, b []byte, i int, f float64) {
	switch dt {
	case gpu.Float32:
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(f)))
	case gpu.Float64:
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f))
	case gpu.Float16:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(half.F16(float32(f))))
	case gpu.BFloat16:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(half.BF16(float32(f))))
	default:
		panic("gputest: putFloat on " + dt.String())
	}
}

// refFill, refArange, refAdd and refScale give element i of the expected
// result: as an int64 (already wrapped) for integer dtypes, as the exact
// float64 value for float ones. a and b hold the inputs.

func refFill(dt gpu.DType, v gpu.Scalar) (int64, float64) {
	if dt.IsFloat() {
		return 0, v.Float64()
	}
	return dt.Wrap(v.Int64()), 0
}

func refArange(dt gpu.DType, i int, start, step gpu.Scalar) (int64, float64) {
	f := start.Float64() + float64(i)*step.Float64()
	if dt.IsFloat() {
		return 0, f
	}
	if start.IsInt && step.IsInt {
		return dt.Wrap(start.I + int64(i)*step.I), 0
	}
	return dt.Wrap(gpu.TruncSat(f)), 0
}

func refAdd(dt gpu.DType, a, b []byte, i int) (int64, float64) {
	if dt.IsFloat() {
		return 0, getFloat(dt, a, i) + getFloat(dt, b, i)
	}
	return dt.Wrap(getInt(dt, a, i) + getInt(dt, b, i)), 0
}

func refScale(dt gpu.DType, a []byte, i int, f gpu.Scalar) (int64, float64) {
	if dt.IsFloat() {
		return 0, getFloat(dt, a, i) * f.Float64()
	}
	x := getInt(dt, a, i)
	if f.IsInt {
		return dt.Wrap(x * f.I), 0
	}
	return dt.Wrap(gpu.TruncSat(float64(x) * f.F)), 0
}

// closeEnough compares a float result with its exact expected value.
func closeEnough(dt gpu.DType, got, want float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	return math.Abs(got-want) <= tolerance(dt)*math.Abs(want)
}
