//go:build amd64 && !purego

package reduce

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// TestAsmToMatchesGo calls every "To" kernel this CPU supports directly
// (dst[i] = a[i] op b[i]) and compares it with the pure-Go toGo: every op,
// float32 and float64, every length up to 300 and two long ones, at
// shifted start offsets, with guard elements after dst that must stay
// untouched and a and b left as they were.
func TestAsmToMatchesGo(t *testing.T) {
	ks := supportedKernels()
	if len(ks) == 0 {
		t.Skip("CPU has neither AVX2 nor AVX-512")
	}
	r := rand.New(rand.NewPCG(13, 14))
	var lengths []int
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 1024+13, 4099)
	const guard = 20
	for _, k := range ks {
		for _, op := range Ops {
			for _, dt := range []gpu.DType{gpu.Float32, gpu.Float64} {
				t.Run(fmt.Sprintf("%s/%s/%s", k.name, op, dt), func(t *testing.T) {
					for _, n := range lengths {
						for _, shift := range []int{0, 1, 3} {
							total := n + shift + guard
							a, b, dst := randBuf(r, dt, total), randBuf(r, dt, total), randBuf(r, dt, total)
							a0, b0 := append([]byte(nil), a...), append([]byte(nil), b...)
							want := append([]byte(nil), dst...)
							sz := dt.Size()
							lo, hi := shift*sz, (shift+n)*sz
							if dt == gpu.Float32 {
								toGo(op, asF32(want[lo:hi]), asF32(a[lo:hi]), asF32(b[lo:hi]))
								if n > 0 {
									k.f32to[op](&asF32(dst)[shift], &asF32(a)[shift], &asF32(b)[shift], n)
								}
							} else {
								toGo(op, asF64(want[lo:hi]), asF64(a[lo:hi]), asF64(b[lo:hi]))
								if n > 0 {
									k.f64to[op](&asF64(dst)[shift], &asF64(a)[shift], &asF64(b)[shift], n)
								}
							}
							if !sameResult(t, op, dt, dst, want) || !sameResult(t, op, dt, a, a0) || !sameResult(t, op, dt, b, b0) {
								t.Fatalf("n=%d shift=%d", n, shift)
							}
						}
					}
				})
			}
		}
	}
}

// TestAsmToNaNLanes puts a single NaN in each lane position of a or b for
// min and max: every vector lane's NaN fix-up of the To kernels is
// exercised, and only that element is NaN.
func TestAsmToNaNLanes(t *testing.T) {
	for _, k := range supportedKernels() {
		for _, op := range []Op{Min, Max} {
			for pos := range 80 {
				for _, inA := range []bool{true, false} {
					a, b, d := make([]float64, 80), make([]float64, 80), make([]float64, 80)
					for i := range a {
						a[i], b[i] = float64(i), float64(-i)
					}
					if inA {
						a[pos] = math.NaN()
					} else {
						b[pos] = math.NaN()
					}
					k.f64to[op](&d[0], &a[0], &b[0], len(d))
					for i, v := range d {
						if isNaN := v != v; isNaN != (i == pos) {
							t.Fatalf("%s %s NaN at %d (in a %v): element %d = %v", k.name, op, pos, inA, i, v)
						}
					}
				}
			}
		}
	}
}
