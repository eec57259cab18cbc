package reduce

// element is every Go type the pure-Go kernel reduces: the floats and the
// Go types behind the integer gpu.DTypes.
type element interface {
	~float32 | ~float64 | ~int8 | ~int16 | ~int32 | ~int64 | ~uint8
}

// intoGo is the pure-Go kernel: dst[i] = dst[i] op src[i]. Integers wrap on
// overflow (Go's arithmetic is two's complement); for floats the builtin
// min and max give NaN if either operand is NaN. len(src) must be >=
// len(dst); op must be valid.
func intoGo[T element](op Op, dst, src []T) {
	src = src[:len(dst)]
	switch op {
	case Sum:
		for i := range dst {
			dst[i] += src[i]
		}
	case Prod:
		for i := range dst {
			dst[i] *= src[i]
		}
	case Min:
		for i := range dst {
			dst[i] = min(dst[i], src[i])
		}
	case Max:
		for i := range dst {
			dst[i] = max(dst[i], src[i])
		}
	}
}
