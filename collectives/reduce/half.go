package reduce

import (
	"encoding/binary"

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

// widenHalfGo sets f[i] to the exact float32 value of the i-th little-endian
// 16-bit element of b (float16 or bfloat16 as dt says); len(b) == 2*len(f).
func widenHalfGo(dt gpu.DType, f []float32, b []byte) {
	b = b[:2*len(f)]
	if dt == gpu.BFloat16 {
		for i := range f {
			f[i] = half.BFloat16(binary.LittleEndian.Uint16(b[2*i:])).Float32()
		}
		return
	}
	for i := range f {
		f[i] = half.Float16(binary.LittleEndian.Uint16(b[2*i:])).Float32()
	}
}

// narrowHalfGo rounds each f[i] to dt (nearest, ties to even) and stores it as
// the i-th little-endian 16-bit element of b; len(b) == 2*len(f).
func narrowHalfGo(dt gpu.DType, b []byte, f []float32) {
	b = b[:2*len(f)]
	if dt == gpu.BFloat16 {
		for i, v := range f {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(half.BF16(v)))
		}
		return
	}
	for i, v := range f {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(half.F16(v)))
	}
}
