package reduce

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// This file holds the test reference: element codecs and a scalar
// implementation of every op computed in float64 or exact big-integer
// arithmetic, independent of the kernels under test.

// testLengths are the element counts every kernel is checked at: empty,
// below, at and around the vector widths, and long with an odd tail.
var testLengths = []int{0, 1, 7, 8, 15, 16, 17, 1023, 1024 + 13}

// getI reads element i of b (integer dtype dt) as an exact big.Int.
func getI(dt gpu.DType, b []byte, i int) *big.Int { return big.NewInt(dt.Int(b, i)) }

// putI stores v modulo 2^bits (two's complement wrap) as element i of b.
func putI(dt gpu.DType, b []byte, i int, v *big.Int) {
	m := new(big.Int).Lsh(big.NewInt(1), uint(8*dt.Size()))
	dt.SetInt(b, i, int64(new(big.Int).Mod(v, m).Uint64())) // in [0, 2^bits): its low bits
}

// refF applies op to a and b in float64 with the package's NaN rule, then
// rounds to the precision the kernel computes in (float64 for Float64,
// float32 otherwise). Rounding an exact-in-double result of +,* on float32
// inputs to float32 gives the correctly rounded float32 result.
func refF(op Op, dt gpu.DType, a, b float64) float64 {
	var r float64
	switch {
	case op == Sum:
		r = a + b
	case op == Prod:
		r = a * b
	case math.IsNaN(a) || math.IsNaN(b):
		r = math.NaN()
	case op == Min:
		r = math.Min(a, b)
	case op == Max:
		r = math.Max(a, b)
	}
	if dt != gpu.Float64 {
		r = float64(float32(r))
	}
	return r
}

// refI applies op to a and b exactly.
func refI(op Op, a, b *big.Int) *big.Int {
	switch op {
	case Sum:
		return new(big.Int).Add(a, b)
	case Prod:
		return new(big.Int).Mul(a, b)
	case Min:
		if a.Cmp(b) <= 0 {
			return a
		}
		return b
	case Max:
		if a.Cmp(b) >= 0 {
			return a
		}
		return b
	}
	panic("refI: " + op.String())
}

// refMany computes the expected result of Many(op, dt, _, srcs...) into a
// fresh buffer: left to right, in float32 (float64 for Float64) with a
// single final rounding for the 16-bit types; exact and wrapped for integers.
func refMany(op Op, dt gpu.DType, srcs ...[]byte) []byte {
	out := make([]byte, len(srcs[0]))
	n := len(out) / dt.Size()
	for i := 0; i < n; i++ {
		if dt.IsFloat() {
			acc := dt.Float(srcs[0], i)
			for _, s := range srcs[1:] {
				acc = refF(op, dt, acc, dt.Float(s, i))
			}
			dt.SetFloat(out, i, acc)
			continue
		}
		acc := getI(dt, srcs[0], i)
		for _, s := range srcs[1:] {
			acc = refI(op, acc, getI(dt, s, i))
		}
		putI(dt, out, i, acc)
	}
	return out
}

// randBuf returns n random elements of dt. Floats mix ordinary values
// (small, so products stay finite) with random bit patterns, which include
// NaN, infinities, zeros of both signs and subnormals.
func randBuf(r *rand.Rand, dt gpu.DType, n int) []byte {
	b := make([]byte, n*dt.Size())
	if !dt.IsFloat() {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for i := 0; i < n; i++ {
		switch r.IntN(10) {
		case 0: // any bit pattern
			switch dt.Size() {
			case 2:
				binary.LittleEndian.PutUint16(b[2*i:], uint16(r.Uint32()))
			case 4:
				binary.LittleEndian.PutUint32(b[4*i:], r.Uint32())
			case 8:
				binary.LittleEndian.PutUint64(b[8*i:], r.Uint64())
			}
		case 1:
			dt.SetFloat(b, i, [...]float64{0, math.Copysign(0, -1), 1, -1, math.Inf(1), math.Inf(-1)}[r.IntN(6)])
		default:
			dt.SetFloat(b, i, (r.Float64()*2-1)*8)
		}
	}
	return b
}

// sameResult reports whether got and want hold the same elements of dt:
// equal bits, or both NaN, or (for Min/Max) zeros of either sign.
func sameResult(t *testing.T, op Op, dt gpu.DType, got, want []byte) bool {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("length %d, want %d", len(got), len(want))
		return false
	}
	n := len(got) / dt.Size()
	bad := 0
	for i := 0; i < n; i++ {
		sz := dt.Size()
		if string(got[i*sz:(i+1)*sz]) == string(want[i*sz:(i+1)*sz]) {
			continue
		}
		if dt.IsFloat() {
			g, w := dt.Float(got, i), dt.Float(want, i)
			if math.IsNaN(g) && math.IsNaN(w) {
				continue
			}
			if (op == Min || op == Max) && g == 0 && w == 0 {
				continue
			}
			t.Errorf("%s %s element %d of %d: got %v, want %v", op, dt, i, n, g, w)
		} else {
			t.Errorf("%s %s element %d of %d: got %v, want %v", op, dt, i, n, getI(dt, got, i), getI(dt, want, i))
		}
		if bad++; bad > 5 {
			return false
		}
	}
	return bad == 0
}
