//go:build amd64 && !purego

package reduce

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// TestHalfConvAsmMatchesGo runs the assembly conversions directly against
// the Go ones: widening every 16-bit pattern, and narrowing float32 values
// at, next to and exactly between representable 16-bit values (ties), plus
// random bit patterns (NaN, infinities, subnormals, overflow).
func TestHalfConvAsmMatchesGo(t *testing.T) {
	for _, dt := range []gpu.DType{gpu.Float16, gpu.BFloat16} {
		c := convFor(dt)
		if c == nil {
			t.Logf("%s: no assembly conversion on this CPU", dt)
			continue
		}
		// Widen: all 65536 patterns.
		b := make([]byte, 2<<16)
		for i := range 1 << 16 {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(i))
		}
		got, want := make([]float32, 1<<16), make([]float32, 1<<16)
		c.widen(&got[0], &b[0], len(got))
		widenHalfGo(dt, want, b)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(isNaN32(got[i]) && isNaN32(want[i])) {
				t.Fatalf("%s widen %#04x: asm %v, go %v", dt, i, got[i], want[i])
			}
		}
		// Narrow: each widened value, its neighbours, the midpoint to the
		// next value, and random patterns.
		r := rand.New(rand.NewPCG(13, 14))
		var fs []float32
		for i := 0; i+1 < len(want); i++ {
			w := math.Float32bits(want[i])
			mid := (float64(want[i]) + float64(want[i+1])) / 2
			fs = append(fs, want[i], math.Float32frombits(w+1), math.Float32frombits(w-1), float32(mid))
		}
		for range 1 << 16 {
			fs = append(fs, math.Float32frombits(r.Uint32()))
		}
		fs = fs[:len(fs)&^7]
		gb, wb := make([]byte, 2*len(fs)), make([]byte, 2*len(fs))
		c.narrow(&gb[0], &fs[0], len(fs))
		narrowHalfGo(dt, wb, fs)
		for i := range fs {
			g, w := binary.LittleEndian.Uint16(gb[2*i:]), binary.LittleEndian.Uint16(wb[2*i:])
			if g != w && !(isNaN32(fs[i]) && halfIsNaN(dt, g) && halfIsNaN(dt, w)) {
				t.Fatalf("%s narrow %v (%#08x): asm %#04x, go %#04x", dt, fs[i], math.Float32bits(fs[i]), g, w)
			}
		}
	}
}

// TestHalfConvTails checks widenHalf/narrowHalf (assembly body plus Go
// tail) at every length up to 40 and at odd byte offsets.
func TestHalfConvTails(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, dt := range []gpu.DType{gpu.Float16, gpu.BFloat16} {
		for n := 0; n <= 40; n++ {
			for _, off := range []int{0, 1} {
				b := randBuf(r, dt, n+1)[off : off+2*n]
				got, want := make([]float32, n), make([]float32, n)
				widenHalf(dt, got, b)
				widenHalfGo(dt, want, b)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(isNaN32(got[i]) && isNaN32(want[i])) {
						t.Fatalf("%s n=%d off=%d widen element %d: %v, want %v", dt, n, off, i, got[i], want[i])
					}
				}
				out, ref := make([]byte, 2*n+off+4), make([]byte, 2*n+off+4)
				narrowHalf(dt, out[off:off+2*n], got)
				narrowHalfGo(dt, ref[off:off+2*n], want)
				if !sameResult(t, Sum, dt, out, ref) {
					t.Fatalf("%s n=%d off=%d narrow differs", dt, n, off)
				}
			}
		}
	}
}

// isNaN32 reports whether f is a NaN.
func isNaN32(f float32) bool { return f != f }

// halfIsNaN reports whether the 16-bit pattern h of dt is a NaN.
func halfIsNaN(dt gpu.DType, h uint16) bool {
	if dt == gpu.BFloat16 {
		return h&0x7F80 == 0x7F80 && h&0x7F != 0
	}
	return h&0x7C00 == 0x7C00 && h&0x3FF != 0
}
