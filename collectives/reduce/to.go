package reduce

import "github.com/choreo-gpu/choreo/gpu"

// toBytes sets dst[i] = a[i] op b[i] in one pass, for float32 and float64
// buffers that are views of their elements (aligned), and reports whether
// it did; otherwise it leaves dst alone. It spares Many the copy of its
// first source into dst before the second is folded in.
func toBytes(op Op, dt gpu.DType, dst, a, b []byte) bool {
	switch dt {
	case gpu.Float32:
		return toView(op, dst, a, b, float32To)
	case gpu.Float64:
		return toView(op, dst, a, b, float64To)
	}
	return false
}

// toView runs f over the three buffers as []T when each is a view of its
// elements.
func toView[T number](op Op, dst, a, b []byte, f func(op Op, d, a, b []T)) bool {
	d, okd := view[T](dst)
	x, oka := view[T](a)
	y, okb := view[T](b)
	if !okd || !oka || !okb {
		return false
	}
	f(op, d, x, y)
	return true
}

// toGo is the pure-Go kernel of toBytes: dst[i] = a[i] op b[i], with
// intoGo's semantics (the builtin min and max give NaN if either operand
// is NaN). a and b have at least len(dst) elements; op must be valid.
func toGo[T element](op Op, dst, a, b []T) {
	a, b = a[:len(dst)], b[:len(dst)]
	switch op {
	case Sum:
		for i := range dst {
			dst[i] = a[i] + b[i]
		}
	case Prod:
		for i := range dst {
			dst[i] = a[i] * b[i]
		}
	case Min:
		for i := range dst {
			dst[i] = min(a[i], b[i])
		}
	case Max:
		for i := range dst {
			dst[i] = max(a[i], b[i])
		}
	}
}
