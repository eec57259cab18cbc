package sim

import (
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
)

// integer is every integer element type; arithmetic on them wraps.
type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8
}

// float is the element types with native Go arithmetic.
type float interface{ ~float32 | ~float64 }

// fill, arange, add and scale dispatch on the dtype to the typed kernels
// below. The 16-bit float types are stored as uint16 bits and computed in
// float32 (Arange in float64), rounded once. The dtype is valid and the
// sizes fit: gpu.ValidateBatch checked them.

func fill(dt gpu.DType, dst []byte, n int, v gpu.Scalar) {
	switch dt {
	case gpu.Float32:
		fillT(view[float32](dst, n), float32(v.Float64()))
	case gpu.Float64:
		fillT(view[float64](dst, n), v.Float64())
	case gpu.Float16:
		fillT(view[uint16](dst, n), uint16(half.F16(float32(v.Float64()))))
	case gpu.BFloat16:
		fillT(view[uint16](dst, n), uint16(half.BF16(float32(v.Float64()))))
	case gpu.Int8:
		fillT(view[int8](dst, n), int8(v.Int64()))
	case gpu.Int16:
		fillT(view[int16](dst, n), int16(v.Int64()))
	case gpu.Int32:
		fillT(view[int32](dst, n), int32(v.Int64()))
	case gpu.Int64:
		fillT(view[int64](dst, n), v.Int64())
	case gpu.Uint8:
		fillT(view[uint8](dst, n), uint8(v.Int64()))
	}
}

func fillT[T any](d []T, v T) {
	for i := range d {
		d[i] = v
	}
}

func arange(dt gpu.DType, dst []byte, n int, start, step gpu.Scalar) {
	switch dt {
	case gpu.Float32:
		arangeFloat(view[float32](dst, n), start.Float64(), step.Float64())
	case gpu.Float64:
		arangeFloat(view[float64](dst, n), start.Float64(), step.Float64())
	case gpu.Float16:
		d := view[uint16](dst, n)
		s0, s1 := start.Float64(), step.Float64()
		for i := range d {
			d[i] = uint16(half.F16(float32(s0 + float64(i)*s1)))
		}
	case gpu.BFloat16:
		d := view[uint16](dst, n)
		s0, s1 := start.Float64(), step.Float64()
		for i := range d {
			d[i] = uint16(half.BF16(float32(s0 + float64(i)*s1)))
		}
	case gpu.Int8:
		arangeInt(view[int8](dst, n), start, step)
	case gpu.Int16:
		arangeInt(view[int16](dst, n), start, step)
	case gpu.Int32:
		arangeInt(view[int32](dst, n), start, step)
	case gpu.Int64:
		arangeInt(view[int64](dst, n), start, step)
	case gpu.Uint8:
		arangeInt(view[uint8](dst, n), start, step)
	}
}

func arangeFloat[T float](d []T, start, step float64) {
	for i := range d {
		d[i] = T(start + float64(i)*step)
	}
}

// arangeInt is exact (wrapping int64 arithmetic) for integer Scalars and
// computes in float64 with truncSat otherwise.
func arangeInt[T integer](d []T, start, step gpu.Scalar) {
	if start.IsInt && step.IsInt {
		v := start.I
		for i := range d {
			d[i] = T(v)
			v += step.I
		}
		return
	}
	s0, s1 := start.Float64(), step.Float64()
	for i := range d {
		d[i] = T(gpu.TruncSat(s0 + float64(i)*s1))
	}
}

func add(dt gpu.DType, dst, a, b []byte, n int) {
	switch dt {
	case gpu.Float32:
		addT(view[float32](dst, n), view[float32](a, n), view[float32](b, n))
	case gpu.Float64:
		addT(view[float64](dst, n), view[float64](a, n), view[float64](b, n))
	case gpu.Float16:
		d, x, y := view[half.Float16](dst, n), view[half.Float16](a, n), view[half.Float16](b, n)
		x, y = x[:len(d)], y[:len(d)]
		for i := range d {
			d[i] = half.F16(x[i].Float32() + y[i].Float32())
		}
	case gpu.BFloat16:
		d, x, y := view[half.BFloat16](dst, n), view[half.BFloat16](a, n), view[half.BFloat16](b, n)
		x, y = x[:len(d)], y[:len(d)]
		for i := range d {
			d[i] = half.BF16(x[i].Float32() + y[i].Float32())
		}
	case gpu.Int8:
		addT(view[int8](dst, n), view[int8](a, n), view[int8](b, n))
	case gpu.Int16:
		addT(view[int16](dst, n), view[int16](a, n), view[int16](b, n))
	case gpu.Int32:
		addT(view[int32](dst, n), view[int32](a, n), view[int32](b, n))
	case gpu.Int64:
		addT(view[int64](dst, n), view[int64](a, n), view[int64](b, n))
	case gpu.Uint8:
		addT(view[uint8](dst, n), view[uint8](a, n), view[uint8](b, n))
	}
}

func addT[T integer | float](d, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	for i := range d {
		d[i] = a[i] + b[i]
	}
}

func scale(dt gpu.DType, dst, src []byte, n int, f gpu.Scalar) {
	switch dt {
	case gpu.Float32:
		scaleFloat(view[float32](dst, n), view[float32](src, n), float32(f.Float64()))
	case gpu.Float64:
		scaleFloat(view[float64](dst, n), view[float64](src, n), f.Float64())
	case gpu.Float16:
		d, s := view[half.Float16](dst, n), view[half.Float16](src, n)
		s = s[:len(d)]
		k := float32(f.Float64())
		for i := range d {
			d[i] = half.F16(s[i].Float32() * k)
		}
	case gpu.BFloat16:
		d, s := view[half.BFloat16](dst, n), view[half.BFloat16](src, n)
		s = s[:len(d)]
		k := float32(f.Float64())
		for i := range d {
			d[i] = half.BF16(s[i].Float32() * k)
		}
	case gpu.Int8:
		scaleInt(view[int8](dst, n), view[int8](src, n), f)
	case gpu.Int16:
		scaleInt(view[int16](dst, n), view[int16](src, n), f)
	case gpu.Int32:
		scaleInt(view[int32](dst, n), view[int32](src, n), f)
	case gpu.Int64:
		scaleInt(view[int64](dst, n), view[int64](src, n), f)
	case gpu.Uint8:
		scaleInt(view[uint8](dst, n), view[uint8](src, n), f)
	}
}

func scaleFloat[T float](d, s []T, k T) {
	s = s[:len(d)]
	for i := range d {
		d[i] = s[i] * k
	}
}

// scaleInt multiplies exactly (wrapping) by an integer factor, and by a
// float factor in float64 with truncSat.
func scaleInt[T integer](d, s []T, f gpu.Scalar) {
	s = s[:len(d)]
	if f.IsInt {
		k := T(f.I)
		for i := range d {
			d[i] = s[i] * k
		}
		return
	}
	for i := range d {
		d[i] = T(gpu.TruncSat(float64(s[i]) * f.F))
	}
}
