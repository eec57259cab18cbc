package gputest

import (
	"math"

	"github.com/choreo-gpu/choreo/gpu"
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
		return 0, dt.Float(a, i) + dt.Float(b, i)
	}
	return dt.Wrap(dt.Int(a, i) + dt.Int(b, i)), 0
}

func refScale(dt gpu.DType, a []byte, i int, f gpu.Scalar) (int64, float64) {
	if dt.IsFloat() {
		return 0, dt.Float(a, i) * f.Float64()
	}
	x := dt.Int(a, i)
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
	if got == want { // infinities too
		return true
	}
	return math.Abs(got-want) <= tolerance(dt)*math.Abs(want)
}
