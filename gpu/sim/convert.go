package sim

import (
	"math"

	"github.com/choreo-gpu/choreo/gpu"
)

// truncSat converts f to int64 by truncation toward zero, saturating at the
// int64 limits; NaN gives 0. This is the one float -> integer rule of the
// sim's kernels (see the package doc).
func truncSat(f float64) int64 {
	switch {
	case f != f:
		return 0
	case f >= math.MaxInt64: // 2^63 as a float64
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// scalarInt is a Scalar as an integer element value before wrapping: exact
// for integer Scalars, truncSat for float ones.
func scalarInt(s gpu.Scalar) int64 {
	if s.IsInt {
		return s.I
	}
	return truncSat(s.F)
}
