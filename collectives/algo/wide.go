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

// widen returns src (elements of dt, a half type) as float32 bytes.
func widen(dt gpu.DType, src []byte) []byte {
	dst := make([]byte, len(src)*2)
	for i := 0; i < len(src)/2; i++ {
		h := binary.LittleEndian.Uint16(src[2*i:])
		var f float32
		if dt == gpu.Float16 {
			f = half.Float16(h).Float32()
		} else {
			f = half.BFloat16(h).Float32()
		}
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
	}
	return dst
}

// narrow rounds the float32 bytes src into dst (elements of dt, a half type).
func narrow(dt gpu.DType, dst, src []byte) {
	for i := 0; i < len(dst)/2; i++ {
		f := math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		var h uint16
		if dt == gpu.Float16 {
			h = uint16(half.F16(f))
		} else {
			h = uint16(half.BF16(f))
		}
		binary.LittleEndian.PutUint16(dst[2*i:], h)
	}
}
