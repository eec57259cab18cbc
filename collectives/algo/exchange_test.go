package algo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// rootedConfigs: PeerAccess (direct), messages with the tree (small) and
// with the bandwidth variant (linear, ring reduce-scatter).
var rootedConfigs = []config{
	{"direct", false, nil},
	{"msg-tree", true, []algo.Option{algo.WithSmallBytes(1 << 30)}},
	{"msg-linear", true, []algo.Option{algo.WithSmallBytes(-1), algo.WithChunkBytes(96)}},
	{"forced-messages", false, []algo.Option{algo.WithAlgorithm(algo.Ring), algo.WithSmallBytes(-1)}},
}

// forEachRooted runs fn for every rooted config, rank count, dtype and
// size, collecting a few failures.
func forEachRooted(t *testing.T, fn func(cfg config, n int, dt gpu.DType, count int, i int) error) {
	for _, cfg := range rootedConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			fails, i := 0, 0
			for _, n := range matrixRanks {
				for _, dt := range gpu.DTypes {
					for _, count := range []int{0, 1, 7, 1024} {
						i++
						if err := fn(cfg, n, dt, count, i); err != nil {
							t.Errorf("n=%d %s count=%d: %v", n, dt, count, err)
							if fails++; fails > 5 {
								t.FailNow()
							}
						}
					}
				}
			}
		})
	}
}

// splits is an uneven split matrix for n ranks with zero counts in it:
// counts[i][j] is what rank i sends rank j.
func splits(n, base, seed int) [][]int {
	m := make([][]int, n)
	for i := range m {
		m[i] = make([]int, n)
		for j := range m[i] {
			if (i+j+seed)%3 != 0 {
				m[i][j] = base + (i*7+j*3+seed)%5
			}
		}
	}
	return m
}

func TestAllToAllMatrix(t *testing.T) {
	forEachRooted(t, func(cfg config, n int, dt gpu.DType, count int, i int) error {
		ts := local(n, cfg.plain)
		defer closeAll(ts)
		counts := splits(n, count, i)
		if i%2 == 0 { // equal splits
			for a := range counts {
				for b := range counts[a] {
					counts[a][b] = count
				}
			}
		}
		es := dt.Size()
		ins := make([][][]byte, n) // ins[i][j]: rank i's block for j
		flat := make([][]byte, n)
		for a := range ins {
			ins[a] = make([][]byte, n)
			for b := range ins[a] {
				ins[a][b] = gen(dt, reduce.Min, counts[a][b], a*64+b, uint64(i))
				flat[a] = append(flat[a], ins[a][b]...)
			}
		}
		outs := make([][]byte, n)
		err := firstErr(onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
			send, recv := make([]int, n), make([]int, n)
			total := 0
			for j := range n {
				send[j], recv[j] = counts[r][j], counts[j][r]
				total += recv[j]
			}
			outs[r] = make([]byte, total*es)
			d := algo.Desc{Group: 30, Seq: uint64(i), DType: dt, Count: len(flat[r]) / es}
			return algo.AllToAll(ctx, tr, d, flat[r], outs[r], send, recv, cfg.opts...)
		}))
		if err != nil {
			return err
		}
		for r := range outs {
			var want []byte
			for j := range n {
				want = append(want, ins[j][r]...)
			}
			if !bytes.Equal(outs[r], want) {
				return fmt.Errorf("rank %d: wrong blocks", r)
			}
		}
		return nil
	})
}

func TestGatherMatrix(t *testing.T) {
	forEachRooted(t, func(cfg config, n int, dt gpu.DType, count int, i int) error {
		ts := local(n, cfg.plain)
		defer closeAll(ts)
		root := i % n
		inputs := make([][]byte, n)
		var want []byte
		for r := range inputs {
			inputs[r] = gen(dt, reduce.Max, count, r, uint64(i))
			want = append(want, inputs[r]...)
		}
		out := make([]byte, len(want))
		inPlace := i%2 == 0
		if inPlace {
			copy(out[root*len(inputs[root]):], inputs[root])
		}
		err := firstErr(onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
			in, o := inputs[r], []byte(nil)
			if r == root {
				o = out
				if inPlace {
					in = out[r*len(in) : (r+1)*len(in)]
				}
			}
			return algo.Gather(ctx, tr, algo.Desc{Group: 31, Seq: uint64(i), DType: dt, Count: count, Root: root}, in, o, cfg.opts...)
		}))
		if err != nil {
			return err
		}
		if !bytes.Equal(out, want) {
			return fmt.Errorf("root %d: wrong gather (inplace=%v)", root, inPlace)
		}
		return nil
	})
}

func TestScatterMatrix(t *testing.T) {
	forEachRooted(t, func(cfg config, n int, dt gpu.DType, count int, i int) error {
		ts := local(n, cfg.plain)
		defer closeAll(ts)
		root := (i + 1) % n
		full := gen(dt, reduce.Max, n*count, root, uint64(i))
		l := count * dt.Size()
		outs := make([][]byte, n)
		err := firstErr(onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
			outs[r] = make([]byte, l)
			var in []byte
			if r == root {
				in = full
			}
			return algo.Scatter(ctx, tr, algo.Desc{Group: 32, Seq: uint64(i), DType: dt, Count: count, Root: root}, in, outs[r], cfg.opts...)
		}))
		if err != nil {
			return err
		}
		for r := range outs {
			if !bytes.Equal(outs[r], full[r*l:(r+1)*l]) {
				return fmt.Errorf("rank %d (root %d): wrong block", r, root)
			}
		}
		return nil
	})
}

func TestReduceMatrix(t *testing.T) {
	forEachRooted(t, func(cfg config, n int, dt gpu.DType, count int, i int) error {
		ts := local(n, cfg.plain)
		defer closeAll(ts)
		op := reduce.Ops[i%len(reduce.Ops)]
		root := (i + 2) % n
		inputs := make([][]byte, n)
		for r := range inputs {
			inputs[r] = gen(dt, op, count, r, uint64(i))
		}
		want := reference(dt, op, inputs, count)
		out := make([]byte, count*dt.Size())
		err := firstErr(onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
			var o []byte
			if r == root {
				o = out
			}
			d := algo.Desc{Group: 33, Seq: uint64(i), DType: dt, Count: count, Op: op, Root: root}
			return algo.Reduce(ctx, tr, d, inputs[r], o, cfg.opts...)
		}))
		if err != nil {
			return err
		}
		if err := check(dt, out, want); err != nil {
			return fmt.Errorf("root %d %s: %w", root, op, err)
		}
		return nil
	})
}

// A rank whose receive counts disagree with a peer's send counts fails
// every rank, each with ErrShapeMismatch naming the same pair, over both
// paths; so does a rank whose rooted payload differs, and a root out of
// range fails every rank with ErrBadArgument.
func TestExchangeMismatch(t *testing.T) {
	for _, cfg := range rootedConfigs {
		for _, n := range []int{2, 3, 4} {
			ts := local(n, cfg.plain)
			errs := onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
				send, recv := make([]int, n), make([]int, n)
				for j := range n {
					send[j], recv[j] = 2, 2
				}
				if r == n-1 {
					recv[0] = 3 // rank 0 sends 2
				}
				in := make([]byte, 4*2*n)
				out := make([]byte, 4*sum(recv))
				return algo.AllToAll(ctx, tr, algo.Desc{Group: 34, Seq: 1, DType: gpu.Float32, Count: 2 * n}, in, out, send, recv, cfg.opts...)
			})
			var first string
			for r, err := range errs {
				if !errors.Is(err, algo.ErrShapeMismatch) {
					t.Fatalf("%s n=%d rank %d: %v, want ErrShapeMismatch", cfg.name, n, r, err)
				}
				if msg := err.Error()[len(fmt.Sprintf("algo: alltoall rank %d", r)):]; first == "" {
					first = msg
				} else if msg != first {
					t.Errorf("%s n=%d rank %d says %q, rank 0 %q", cfg.name, n, r, msg, first)
				}
			}
			errs = onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
				count := 4
				if r == 1 {
					count = 5
				}
				in, out := make([]byte, count*4), make([]byte, count*4)
				return algo.Reduce(ctx, tr, algo.Desc{Group: 34, Seq: 2, DType: gpu.Float32, Count: count, Op: reduce.Sum}, in, out, cfg.opts...)
			})
			for r, err := range errs {
				if !errors.Is(err, algo.ErrShapeMismatch) {
					t.Fatalf("%s n=%d reduce rank %d: %v, want ErrShapeMismatch", cfg.name, n, r, err)
				}
			}
			errs = onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
				in, out := make([]byte, 4), make([]byte, 4*n)
				return algo.Gather(ctx, tr, algo.Desc{Group: 34, Seq: 3, DType: gpu.Float32, Count: 1, Root: n}, in, out, cfg.opts...)
			})
			for r, err := range errs {
				if !errors.Is(err, algo.ErrBadArgument) {
					t.Fatalf("%s n=%d gather rank %d: %v, want ErrBadArgument", cfg.name, n, r, err)
				}
			}
			closeAll(ts)
		}
	}
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}
