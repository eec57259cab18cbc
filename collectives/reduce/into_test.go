package reduce

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// TestIntoMatchesReference checks every op x dtype x length against the
// float64 / big-integer reference.
func TestIntoMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range gpu.DTypes {
		for _, op := range Ops {
			for _, n := range testLengths {
				t.Run(fmt.Sprintf("%s/%s/%d", op, dt, n), func(t *testing.T) {
					a, b := randBuf(r, dt, n), randBuf(r, dt, n)
					want := refMany(op, dt, a, b)
					bOrig := bytes.Clone(b)
					if err := Into(op, dt, a, b); err != nil {
						t.Fatal(err)
					}
					sameResult(t, op, dt, a, want)
					if !bytes.Equal(b, bOrig) {
						t.Error("src was modified")
					}
				})
			}
		}
	}
}

// TestIntoAliased checks Into(dst, dst): x op x.
func TestIntoAliased(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, dt := range gpu.DTypes {
		for _, op := range Ops {
			a := randBuf(r, dt, 1024+13)
			want := refMany(op, dt, a, a)
			if err := Into(op, dt, a, a); err != nil {
				t.Fatal(err)
			}
			sameResult(t, op, dt, a, want)
		}
	}
}

// TestIntoMisaligned runs buffers that start at odd addresses, which the
// typed views cannot take (the decode/encode path).
func TestIntoMisaligned(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range gpu.DTypes {
		for _, op := range Ops {
			n := 600 // more than one bounce block
			a := randBuf(r, dt, n)
			b := randBuf(r, dt, n)
			want := refMany(op, dt, a, b)
			ab := make([]byte, len(a)+1)
			bb := make([]byte, len(b)+3)
			copy(ab[1:], a)
			copy(bb[3:], b)
			if err := Into(op, dt, ab[1:], bb[3:]); err != nil {
				t.Fatal(err)
			}
			sameResult(t, op, dt, ab[1:], want)
		}
	}
}
