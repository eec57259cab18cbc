package algo_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// config is one way to run the algorithms: a transport (with PeerAccess, or
// plain messages) and options that force an algorithm.
type config struct {
	name  string
	plain bool
	opts  []algo.Option
}

var configs = []config{
	{"direct-small", false, nil}, // Auto over PeerAccess, payloads under the threshold
	{"direct-sliced", false, []algo.Option{algo.WithSmallBytes(-1)}},
	{"ring", false, []algo.Option{algo.WithAlgorithm(algo.Ring), algo.WithChunkBytes(64)}},
	{"doubling", false, []algo.Option{algo.WithAlgorithm(algo.Doubling)}},
	// Message transports, algorithm picked by the threshold.
	{"msg-ring", true, []algo.Option{algo.WithSmallBytes(-1), algo.WithChunkBytes(96)}},
	{"msg-doubling", true, []algo.Option{algo.WithSmallBytes(1 << 30)}},
}

var (
	matrixSizes = []int{1, 7, 10, 1024}
	matrixRanks = []int{1, 2, 3, 4, 5}
)

// runAllReduce all-reduces gen'd inputs on n ranks and checks every rank's
// result against the float64/exact reference and against rank 0's bits.
func runAllReduce(t testing.TB, cfg config, n int, dt gpu.DType, op reduce.Op, count int, inPlace bool, seq uint64) error {
	ts := local(n, cfg.plain)
	defer closeAll(ts)
	inputs := make([][]byte, n)
	outs := make([][]byte, n)
	for r := range inputs {
		inputs[r] = gen(dt, op, count, r, seq)
		if inPlace {
			outs[r] = bytes.Clone(inputs[r])
		} else {
			outs[r] = make([]byte, len(inputs[r]))
		}
	}
	want := reference(dt, op, inputs, count)
	errs := onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
		d := algo.Desc{Group: 1, Seq: seq, DType: dt, Count: count, Op: op}
		in := inputs[r]
		if inPlace {
			in = outs[r]
		}
		return algo.AllReduce(ctx, tr, d, in, outs[r], cfg.opts...)
	})
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	for r := range outs {
		if err := check(dt, outs[r], want); err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
		if !bytes.Equal(outs[r], outs[0]) {
			return fmt.Errorf("rank %d's result differs from rank 0's", r)
		}
		if !inPlace && !bytes.Equal(inputs[r], gen(dt, op, count, r, seq)) {
			return fmt.Errorf("rank %d's input was modified", r)
		}
	}
	return nil
}

func closeAll(ts []transport.Transport) {
	for _, tr := range ts {
		_ = tr.Close()
	}
}

// TestAllReduceMatrix is the matrix of ops, dtypes and sizes: every dtype and op, sizes below
// and above the rank count, 1..5 ranks, every algorithm, in and out of place.
func TestAllReduceMatrix(t *testing.T) {
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			for _, n := range matrixRanks {
				fails := 0
				i := 0
				for _, dt := range gpu.DTypes {
					for _, op := range reduce.Ops {
						for _, count := range matrixSizes {
							i++
							inPlace := i%2 == 0
							if err := runAllReduce(t, cfg, n, dt, op, count, inPlace, uint64(i)); err != nil {
								t.Errorf("n=%d %s %s count=%d inplace=%v: %v", n, dt, op, count, inPlace, err)
								if fails++; fails > 5 {
									t.FailNow()
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestAllReduceLarge runs a few 1M-element cases (many chunks, both ring
// directions, sliced direct).
func TestAllReduceLarge(t *testing.T) {
	const count = 1024 * 1024
	cases := []struct {
		cfg config
		n   int
		dt  gpu.DType
		op  reduce.Op
	}{
		{configs[1], 4, gpu.Float32, reduce.Sum},
		{config{"ring-default", false, []algo.Option{algo.WithAlgorithm(algo.Ring)}}, 4, gpu.Float32, reduce.Sum},
		{configs[4], 3, gpu.BFloat16, reduce.Sum},
		{configs[1], 5, gpu.Int32, reduce.Max},
		{config{"msg-ring-default", true, nil}, 2, gpu.Float16, reduce.Sum},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s/n=%d/%s/%s", c.cfg.name, c.n, c.dt, c.op), func(t *testing.T) {
			if err := runAllReduce(t, c.cfg, c.n, c.dt, c.op, count, i%2 == 1, uint64(100+i)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
