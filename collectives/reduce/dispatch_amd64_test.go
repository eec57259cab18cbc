//go:build amd64 && !purego

package reduce

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/choreo-gpu/choreo/gpu"
)

// TestAsmMatchesGo calls every assembly kernel this CPU supports directly
// and compares it with the pure-Go kernel: every op, float32 and float64,
// every length up to 300 and a long one, at shifted start offsets, with
// guard elements after dst that must stay untouched.
func TestAsmMatchesGo(t *testing.T) {
	ks := supportedKernels()
	if len(ks) == 0 {
		t.Skip("CPU has neither AVX2 nor AVX-512")
	}
	r := rand.New(rand.NewPCG(11, 12))
	lengths := []int{}
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 1024+13, 4099)
	const guard = 20
	for _, k := range ks {
		for _, op := range Ops {
			for _, dt := range []gpu.DType{gpu.Float32, gpu.Float64} {
				name := fmt.Sprintf("%s/%s/%s", k.name, op, dt)
				t.Run(name, func(t *testing.T) {
					for _, n := range lengths {
						for _, shift := range []int{0, 1, 3} {
							total := n + shift + guard
							src := randBuf(r, dt, total)
							dst := randBuf(r, dt, total)
							want := append([]byte(nil), dst...)
							sz := dt.Size()
							lo, hi := shift*sz, (shift+n)*sz
							if dt == gpu.Float32 {
								intoGo(op, asF32(want[lo:hi]), asF32(src[lo:hi]))
								if n > 0 {
									k.f32[op](&asF32(dst)[shift], &asF32(src)[shift], n)
								}
							} else {
								intoGo(op, asF64(want[lo:hi]), asF64(src[lo:hi]))
								if n > 0 {
									k.f64[op](&asF64(dst)[shift], &asF64(src)[shift], n)
								}
							}
							if !sameResult(t, op, dt, dst, want) {
								t.Fatalf("n=%d shift=%d", n, shift)
							}
						}
					}
				})
			}
		}
	}
}

// TestAsmNaNLanes puts a single NaN in each lane position of dst or src
// for min/max: every vector lane's NaN fix-up is exercised.
func TestAsmNaNLanes(t *testing.T) {
	for _, k := range supportedKernels() {
		for _, op := range []Op{Min, Max} {
			for pos := 0; pos < 80; pos++ {
				for _, inDst := range []bool{true, false} {
					d, s := make([]float32, 80), make([]float32, 80)
					for i := range d {
						d[i], s[i] = float32(i), float32(-i)
					}
					if inDst {
						d[pos] = float32(math.NaN())
					} else {
						s[pos] = float32(math.NaN())
					}
					k.f32[op](&d[0], &s[0], len(d))
					for i, v := range d {
						if isNaN := v != v; isNaN != (i == pos) {
							t.Fatalf("%s %s NaN at %d (dst %v): element %d = %v", k.name, op, pos, inDst, i, v)
						}
					}
				}
			}
		}
	}
}

// asF32 views an aligned little-endian byte slice as []float32.
func asF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// asF64 views an aligned little-endian byte slice as []float64.
func asF64(b []byte) []float64 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
}

// BenchmarkKernelSets runs float32 Sum through each supported instruction
// set explicitly, at the sizes of BenchmarkFloat32Sum.
func BenchmarkKernelSets(b *testing.B) {
	for _, sz := range benchSizes {
		n := sz.bytes / 4
		dst, src := make([]float32, n), make([]float32, n)
		for i := range dst {
			dst[i], src[i] = 1, 2 // touch every page before timing
		}
		for _, k := range supportedKernels() {
			b.Run(sz.name+"/"+k.name, func(b *testing.B) {
				b.SetBytes(int64(sz.bytes))
				for b.Loop() {
					k.f32[Sum](&dst[0], &src[0], n)
				}
			})
		}
	}
}
