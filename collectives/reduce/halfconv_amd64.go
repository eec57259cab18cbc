//go:build amd64 && !purego

package reduce

import (
	"golang.org/x/sys/cpu"

	"github.com/choreo-gpu/choreo/gpu"
)

// halfConv is one way to convert between float32 and a 16-bit float type:
// widen and narrow handle the first n&^7 elements (see _asm/half.go).
type halfConv struct {
	name   string
	widen  func(dst *float32, src *byte, n int)
	narrow func(dst *byte, src *float32, n int)
}

// float16Conv uses F16C (VCVTPH2PS/VCVTPS2PH), bfloat16Conv AVX2 integer
// ops; each is nil where the CPU lacks the instructions. Chosen once at
// start-up.
var (
	float16Conv  = pickConv(cpu.X86.HasAVX && cpu.X86.HasF16C, halfConv{"f16c", widenFloat16F16C, narrowFloat16F16C})
	bfloat16Conv = pickConv(cpu.X86.HasAVX2, halfConv{"avx2", widenBFloat16AVX2, narrowBFloat16AVX2})
)

// pickConv returns &c when ok, else nil.
func pickConv(ok bool, c halfConv) *halfConv {
	if !ok {
		return nil
	}
	return &c
}

// convFor returns the assembly conversion for dt, or nil.
func convFor(dt gpu.DType) *halfConv {
	if dt == gpu.BFloat16 {
		return bfloat16Conv
	}
	return float16Conv
}

// widenHalf widens the 16-bit elements of b into f (see widenHalfGo):
// groups of eight in assembly where the CPU allows, the rest in Go.
func widenHalf(dt gpu.DType, f []float32, b []byte) {
	k := 0
	if c := convFor(dt); c != nil && len(f) >= 8 {
		k = len(f) &^ 7
		_ = b[2*k-1] // the assembly reads 2*k bytes
		c.widen(&f[0], &b[0], k)
	}
	widenHalfGo(dt, f[k:], b[2*k:])
}

// narrowHalf rounds f into the 16-bit elements of b (see narrowHalfGo):
// groups of eight in assembly where the CPU allows, the rest in Go.
func narrowHalf(dt gpu.DType, b []byte, f []float32) {
	k := 0
	if c := convFor(dt); c != nil && len(f) >= 8 {
		k = len(f) &^ 7
		_ = b[2*k-1] // the assembly writes 2*k bytes
		c.narrow(&b[0], &f[0], k)
	}
	narrowHalfGo(dt, b[2*k:], f[k:])
}
