package reduce

import (
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
)

// halfBlock is how many 16-bit elements manyHalf widens per step; two
// float32 blocks of it live on the stack and stay in L1.
const halfBlock = 512

// manyHalf sets dst[i] = srcs[0][i] op srcs[1][i] op ... for dt Float16 or
// BFloat16: every element is widened to float32 exactly, the op is applied
// in float32 (left to right), and the result is rounded to dt once. The
// buffers are checked by the caller (equal length, even, len(srcs) >= 1);
// dst may be srcs[0] (Into passes {dst, src}) but no other source.
func manyHalf(op Op, dt gpu.DType, dst []byte, srcs [][]byte) {
	var acc, tmp [halfBlock]float32
	for off := 0; off < len(dst); off += 2 * halfBlock {
		end := min(off+2*halfBlock, len(dst))
		n := (end - off) / 2
		widenHalf(dt, acc[:n], srcs[0][off:end])
		for _, s := range srcs[1:] {
			widenHalf(dt, tmp[:n], s[off:end])
			float32Into(op, acc[:n], tmp[:n])
		}
		narrowHalf(dt, dst[off:end], acc[:n])
	}
}

// widenHalfGo widens the 16-bit elements of b (float16 or bfloat16 as dt
// says) into f in Go (gpu/half); len(b) >= 2*len(f).
func widenHalfGo(dt gpu.DType, f []float32, b []byte) {
	if dt == gpu.BFloat16 {
		half.WidenBFloat16(f, b)
	} else {
		half.WidenFloat16(f, b)
	}
}

// narrowHalfGo rounds f into the 16-bit elements of b (dt) in Go
// (gpu/half); len(b) >= 2*len(f).
func narrowHalfGo(dt gpu.DType, b []byte, f []float32) {
	if dt == gpu.BFloat16 {
		half.NarrowBFloat16(b, f)
	} else {
		half.NarrowFloat16(b, f)
	}
}
