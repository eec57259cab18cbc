package reduce

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
)

// TestManyMatchesReference checks Many with 1, 2, 3 and 5 sources, into a
// fresh dst and in place over srcs[0], for every op x dtype x length.
func TestManyMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range gpu.DTypes {
		for _, op := range Ops {
			for _, k := range []int{1, 2, 3, 5} {
				for _, n := range testLengths {
					t.Run(fmt.Sprintf("%s/%s/k%d/%d", op, dt, k, n), func(t *testing.T) {
						srcs := make([][]byte, k)
						for i := range srcs {
							srcs[i] = randBuf(r, dt, n)
						}
						want := refMany(op, dt, srcs...)
						dst := make([]byte, len(srcs[0]))
						if err := Many(op, dt, dst, srcs...); err != nil {
							t.Fatal(err)
						}
						sameResult(t, op, dt, dst, want)
						if err := Many(op, dt, srcs[0], srcs...); err != nil {
							t.Fatal(err)
						}
						sameResult(t, op, dt, srcs[0], want)
					})
				}
			}
		}
	}
}

// TestManyLarge crosses Many's block boundary with a tail.
func TestManyLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, dt := range []gpu.DType{gpu.Float32, gpu.Float64, gpu.BFloat16, gpu.Int32} {
		n := (3*manyBlock)/dt.Size() + 5
		srcs := [][]byte{randBuf(r, dt, n), randBuf(r, dt, n), randBuf(r, dt, n)}
		want := refMany(Sum, dt, srcs...)
		dst := make([]byte, len(srcs[0]))
		if err := Many(Sum, dt, dst, srcs...); err != nil {
			t.Fatal(err)
		}
		sameResult(t, Sum, dt, dst, want)
	}
}

// TestManyHalfRoundsOnce: 1 + 2^-11 + 2^-11 in float16 is 1 when rounded
// after every addition (each step is a tie to even) but 1 + 2^-10 when
// accumulated in float32 and rounded once, which is what Many promises.
func TestManyHalfRoundsOnce(t *testing.T) {
	for _, dt := range []gpu.DType{gpu.Float16, gpu.BFloat16} {
		ulp := float32(1.0 / 2048) // half an ulp of 1 in float16
		if dt == gpu.BFloat16 {
			ulp = 1.0 / 256 // half an ulp of 1 in bfloat16
		}
		enc := func(v float32) []byte {
			b := make([]byte, 2)
			if dt == gpu.Float16 {
				binary.LittleEndian.PutUint16(b, uint16(half.F16(v)))
			} else {
				binary.LittleEndian.PutUint16(b, uint16(half.BF16(v)))
			}
			return b
		}
		one, tiny := enc(1), enc(ulp)
		dst := make([]byte, 2)
		if err := Many(Sum, dt, dst, one, tiny, tiny); err != nil {
			t.Fatal(err)
		}
		if want := enc(1 + 2*ulp); !bytes.Equal(dst, want) {
			t.Errorf("%s: 1+h+h = %x, want %x (rounded once)", dt, dst, want)
		}
		// Into rounds on every call, so two Into calls lose both halves.
		acc := bytes.Clone(one)
		for range 2 {
			if err := Into(Sum, dt, acc, tiny); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(acc, one) {
			t.Errorf("%s: Into twice = %x, want %x", dt, acc, one)
		}
	}
}
