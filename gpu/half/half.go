// Package half converts between float32 and the two 16-bit float formats
// choreo supports: IEEE 754 binary16 (float16, through github.com/x448/float16)
// and bfloat16 (the top half of a float32, rounded to nearest even).
// Arithmetic on either is done in float32 (or wider) and rounded once.
package half

import (
	"encoding/binary"
	"math"

	"github.com/x448/float16"
)

// Float16 is an IEEE 754 half-precision value, stored as its bits.
type Float16 uint16

// BFloat16 is a bfloat16 value, stored as its bits.
type BFloat16 uint16

// F16 rounds f to the nearest Float16 (ties to even).
func F16(f float32) Float16 { return Float16(float16.Fromfloat32(f)) }

// Float32 widens h exactly.
func (h Float16) Float32() float32 { return float16.Frombits(uint16(h)).Float32() }

// BF16 rounds f to the nearest BFloat16 (ties to even); NaN stays NaN.
func BF16(f float32) BFloat16 {
	b := math.Float32bits(f)
	if f != f {
		return BFloat16(b>>16 | 0x40) // keep it a quiet NaN
	}
	b += 0x7FFF + (b>>16)&1
	return BFloat16(b >> 16)
}

// Float32 widens b exactly.
func (b BFloat16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// WidenFloat16 sets dst[i] to the exact float32 value of the i-th
// little-endian Float16 in src; src holds at least 2*len(dst) bytes.
func WidenFloat16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = Float16(binary.LittleEndian.Uint16(src[2*i:])).Float32()
	}
}

// WidenBFloat16 is WidenFloat16 for BFloat16 elements.
func WidenBFloat16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = BFloat16(binary.LittleEndian.Uint16(src[2*i:])).Float32()
	}
}

// NarrowFloat16 rounds each src[i] to the nearest Float16 (F16) and stores
// it little-endian as the i-th element of dst, which holds at least
// 2*len(src) bytes.
func NarrowFloat16(dst []byte, src []float32) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], uint16(F16(v)))
	}
}

// NarrowBFloat16 is NarrowFloat16 for BFloat16 elements (BF16).
func NarrowBFloat16(dst []byte, src []float32) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], uint16(BF16(v)))
	}
}
