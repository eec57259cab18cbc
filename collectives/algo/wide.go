package algo

import (
	"encoding/binary"
	"math"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
)

// The message algorithms (ring, doubling) reduce in several steps. To round
// float16 and bfloat16 results once, as the direct algorithm does, they run
// on a float32 widening of the input and narrow the result at the end: the
// partial sums travel as float32 (twice the bytes), and the result is
// bitwise the same on every rank.

func isHalf(dt gpu.DType) bool { return dt == gpu.Float16 || dt == gpu.BFloat16 }

// wideBlock is how many elements widen and narrow convert per step, through
// a float32 block on the stack that stays in L1.
const wideBlock = 512

// widen returns src (elements of dt, a half type) as little-endian float32
// bytes.
func widen(dt gpu.DType, src []byte) []byte {
	dst := make([]byte, len(src)*2)
	var f [wideBlock]float32
	for off := 0; off < len(src); off += 2 * wideBlock {
		b := f[:min(wideBlock, (len(src)-off)/2)]
		if dt == gpu.Float16 {
			half.WidenFloat16(b, src[off:])
		} else {
			half.WidenBFloat16(b, src[off:])
		}
		d := dst[2*off : 2*off+4*len(b)]
		for i, v := range b {
			binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(v))
		}
	}
	return dst
}

// narrow rounds the little-endian float32 bytes src into dst (elements of
// dt, a half type).
func narrow(dt gpu.DType, dst, src []byte) {
	var f [wideBlock]float32
	for off := 0; off < len(dst); off += 2 * wideBlock {
		b := f[:min(wideBlock, (len(dst)-off)/2)]
		s := src[2*off : 2*off+4*len(b)]
		for i := range b {
			b[i] = math.Float32frombits(binary.LittleEndian.Uint32(s[4*i:]))
		}
		if dt == gpu.Float16 {
			half.NarrowFloat16(dst[off:], b)
		} else {
			half.NarrowBFloat16(dst[off:], b)
		}
	}
}
