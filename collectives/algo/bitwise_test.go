package algo_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// Every rank gets bitwise the same result, also where float ops are not
// bitwise commutative (Min/Max of +0 and -0, NaN payloads): recursive
// doubling's partners once computed op(mine, theirs) and op(theirs, mine).
func TestBitwiseEqualOnEveryRank(t *testing.T) {
	cases := []struct {
		name string
		op   reduce.Op
		vals [2]uint32
	}{
		{"min+0-0", reduce.Min, [2]uint32{0, 0x80000000}},
		{"max+0-0", reduce.Max, [2]uint32{0, 0x80000000}},
		{"sumNaNs", reduce.Sum, [2]uint32{0x7fc00001, 0x7fc00002}},
	}
	for _, tc := range cases {
		for _, alg := range []algo.Algorithm{algo.Doubling, algo.Ring} {
			ts := local(2, true)
			outs := make([][]byte, 2)
			errs := onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
				in := make([]byte, 4*4)
				for i := 0; i < 4; i++ {
					binary.LittleEndian.PutUint32(in[4*i:], tc.vals[r])
				}
				outs[r] = make([]byte, len(in))
				return algo.AllReduce(ctx, tr, algo.Desc{Group: 1, Seq: 1, DType: gpu.Float32, Count: 4, Op: tc.op}, in, outs[r], algo.WithAlgorithm(alg))
			})
			noErrors(t, tc.name, errs)
			a, b := binary.LittleEndian.Uint32(outs[0]), binary.LittleEndian.Uint32(outs[1])
			if a != b {
				t.Errorf("%s %v: rank 0 got %#08x, rank 1 got %#08x (not bitwise equal)", tc.name, alg, a, b)
			}
		}
	}
}
