package reduce

import "fmt"

// Float32Into sets dst[i] = dst[i] op src[i] for every i, using the fastest
// kernel this CPU has (AVX-512, AVX2 or pure Go). dst and src must have the
// same length and may be the same slice but must not otherwise overlap. It
// panics if op is invalid or the lengths differ: those are programmer
// errors; Into is the checked entry point.
func Float32Into(op Op, dst, src []float32) {
	checkTyped(op, len(dst), len(src))
	float32Into(op, dst, src)
}

// Float64Into is Float32Into for float64.
func Float64Into(op Op, dst, src []float64) {
	checkTyped(op, len(dst), len(src))
	float64Into(op, dst, src)
}

// checkTyped panics unless op is valid and nd == ns.
func checkTyped(op Op, nd, ns int) {
	if !op.Valid() {
		panic(fmt.Sprintf("reduce: %s: unknown op", op))
	}
	if nd != ns {
		panic(fmt.Sprintf("reduce: %s: dst has %d elements, src %d", op, nd, ns))
	}
}
