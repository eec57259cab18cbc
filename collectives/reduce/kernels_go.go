package reduce

// float32IntoGo is the pure-Go float32 kernel: dst[i] = dst[i] op src[i].
// len(src) must be >= len(dst); op must be valid.
func float32IntoGo(op Op, dst, src []float32) {
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
			dst[i] = min(dst[i], src[i]) // builtin min: NaN if either is NaN
		}
	case Max:
		for i := range dst {
			dst[i] = max(dst[i], src[i])
		}
	}
}

// float64IntoGo is the pure-Go float64 kernel: dst[i] = dst[i] op src[i].
// len(src) must be >= len(dst); op must be valid.
func float64IntoGo(op Op, dst, src []float64) {
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

// integer is every Go element type behind an integer gpu.DType.
type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8
}

// intIntoGo is the integer kernel: dst[i] = dst[i] op src[i], wrapping on
// overflow (Go's integer arithmetic is two's complement). len(src) must be
// >= len(dst); op must be valid.
func intIntoGo[T integer](op Op, dst, src []T) {
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
