package collectives_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// world is n in-process ranks on one runtime and device, each with its own
// GPU stream.
type world struct {
	rt     *actors.Runtime
	dev    gpu.Device
	groups []*collectives.Group
	s      []*streams.GPU
}

func newWorld(t testing.TB, n int, opts ...collectives.Option) *world {
	t.Helper()
	return newWorldOn(t, testenv.Device(t), n, opts...)
}

// newWorldOn is newWorld on dev.
func newWorldOn(t testing.TB, dev gpu.Device, n int, opts ...collectives.Option) *world {
	t.Helper()
	rt := testenv.Runtime(t)
	opts = append([]collectives.Option{collectives.WithTimeout(10 * time.Second)}, opts...)
	gs, err := collectives.Local(rt, n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{rt: rt, dev: dev, groups: gs}
	for range n {
		w.s = append(w.s, testenv.Stream(t, rt, dev))
	}
	return w
}

// input makes rank r's test values: small, varied, exact in every dtype.
func input(dt gpu.DType, r, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		switch {
		case dt.IsFloat():
			v[i] = float64((i*7+r*3)%11-5) * 0.5
		case dt == gpu.Uint8:
			v[i] = float64((i*5 + r*3) % 200)
		default:
			v[i] = float64((i*13+r*29)%250 - 125)
		}
	}
	return v
}

// fromFloat64 uploads vals as an array of dtype dt on s.
func fromFloat64(t testing.TB, s *streams.GPU, dt gpu.DType, vals []float64, shape ...int) *array.Array {
	t.Helper()
	var a *array.Array
	var err error
	switch dt {
	case gpu.Float32:
		a, err = array.FromSlice(s, conv(vals, func(f float64) float32 { return float32(f) }), shape...)
	case gpu.Float64:
		a, err = array.FromSlice(s, vals, shape...)
	case gpu.Float16:
		a, err = array.FromSlice(s, conv(vals, func(f float64) half.Float16 { return half.F16(float32(f)) }), shape...)
	case gpu.BFloat16:
		a, err = array.FromSlice(s, conv(vals, func(f float64) half.BFloat16 { return half.BF16(float32(f)) }), shape...)
	case gpu.Int8:
		a, err = array.FromSlice(s, conv(vals, func(f float64) int8 { return int8(f) }), shape...)
	case gpu.Int16:
		a, err = array.FromSlice(s, conv(vals, func(f float64) int16 { return int16(f) }), shape...)
	case gpu.Int32:
		a, err = array.FromSlice(s, conv(vals, func(f float64) int32 { return int32(f) }), shape...)
	case gpu.Int64:
		a, err = array.FromSlice(s, conv(vals, func(f float64) int64 { return int64(f) }), shape...)
	case gpu.Uint8:
		a, err = array.FromSlice(s, conv(vals, func(f float64) uint8 { return uint8(f) }), shape...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func conv[T any](v []float64, f func(float64) T) []T {
	out := make([]T, len(v))
	for i, x := range v {
		out[i] = f(x)
	}
	return out
}

// reduceRef computes the reference: float64 for floats, wrapping integer
// arithmetic for integers.
func reduceRef(dt gpu.DType, op collectives.Op, ins [][]float64) []float64 {
	out := make([]float64, len(ins[0]))
	for i := range out {
		if dt.IsFloat() {
			acc := ins[0][i]
			for _, in := range ins[1:] {
				acc = applyF(op, acc, in[i])
			}
			out[i] = acc
			continue
		}
		acc := int64(ins[0][i])
		for _, in := range ins[1:] {
			acc = applyI(op, acc, int64(in[i]))
		}
		out[i] = float64(dt.Wrap(acc))
	}
	return out
}

func applyF(op collectives.Op, a, b float64) float64 {
	switch op {
	case collectives.Sum:
		return a + b
	case collectives.Prod:
		return a * b
	case collectives.Min:
		return math.Min(a, b)
	default:
		return math.Max(a, b)
	}
}

func applyI(op collectives.Op, a, b int64) int64 {
	switch op {
	case collectives.Sum:
		return a + b
	case collectives.Prod:
		return a * b
	case collectives.Min:
		return min(a, b)
	default:
		return max(a, b)
	}
}

// tolerance is the relative error bound per dtype (0: exact).
func tolerance(dt gpu.DType) float64 {
	switch dt {
	case gpu.Float32, gpu.Float64:
		return 1e-6
	case gpu.Float16:
		return 5e-3
	case gpu.BFloat16:
		return 1e-1
	}
	return 0
}

// rounded is what the values become once stored in dt.
func rounded(dt gpu.DType, v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		switch dt {
		case gpu.Float32:
			out[i] = float64(float32(x))
		case gpu.Float16:
			out[i] = float64(half.F16(float32(x)).Float32())
		case gpu.BFloat16:
			out[i] = float64(half.BF16(float32(x)).Float32())
		default:
			out[i] = x
		}
	}
	return out
}

func compare(dt gpu.DType, got, want []float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d elements, want %d", len(got), len(want))
	}
	tol := tolerance(dt)
	for i := range got {
		if d := math.Abs(got[i] - want[i]); d > tol*math.Max(1, math.Abs(want[i])) {
			return fmt.Errorf("element %d = %v, want %v (tolerance %g)", i, got[i], want[i], tol)
		}
	}
	return nil
}

// checkFive checks rank r's all-reduce (out of place and in place),
// all-gather, reduce-scatter and broadcast outputs against the reference
// computed from every rank's input ins.
func checkFive(t *testing.T, dt gpu.DType, op collectives.Op, root, count, r int, ins [][]float64, ar, arIn, ag, rs, bc *array.Array) {
	t.Helper()
	n := len(ins)
	full := reduceRef(dt, op, ins)
	for name, a := range map[string]*array.Array{"allreduce": ar, "allreduce in place": arIn} {
		if err := compare(dt, values(t, dt, a), full); err != nil {
			t.Fatalf("%s %s rank %d: %v", name, op, r, err)
		}
	}
	if err := compare(dt, values(t, dt, ag), slices.Concat(ins...)); err != nil {
		t.Fatalf("allgather rank %d: %v", r, err)
	}
	lo, hi := algo.BlockRange(count, n, r)
	if err := compare(dt, values(t, dt, rs), full[lo:hi]); err != nil {
		t.Fatalf("reducescatter %s rank %d: %v", op, r, err)
	}
	if err := compare(dt, values(t, dt, bc), ins[root]); err != nil {
		t.Fatalf("broadcast from %d rank %d: %v", root, r, err)
	}
}
