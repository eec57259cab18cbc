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

// forEach runs fn for every config, rank count, dtype and size of the
// matrix (op-less collectives), collecting a few failures.
func forEach(t *testing.T, fn func(cfg config, n int, dt gpu.DType, count int, i int) error) {
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			fails, i := 0, 0
			for _, n := range matrixRanks {
				for _, dt := range gpu.DTypes {
					for _, count := range matrixSizes {
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

func firstErr(errs []error) error {
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return nil
}

func TestAllGatherMatrix(t *testing.T) {
	forEach(t, func(cfg config, n int, dt gpu.DType, count int, i int) error {
		ts := local(n, cfg.plain)
		defer closeAll(ts)
		inputs := make([][]byte, n)
		var want []byte
		for r := range inputs {
			inputs[r] = gen(dt, reduce.Max, count, r, uint64(i))
			want = append(want, inputs[r]...)
		}
		inPlace := i%2 == 0
		outs := make([][]byte, n)
		for r := range outs {
			outs[r] = make([]byte, len(want))
			if inPlace {
				l := len(inputs[r])
				copy(outs[r][r*l:], inputs[r])
			}
		}
		err := firstErr(onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
			in := inputs[r]
			if inPlace {
				in = outs[r][r*len(in) : (r+1)*len(in)]
			}
			return algo.AllGather(ctx, tr, algo.Desc{Group: 2, Seq: uint64(i), DType: dt, Count: count}, in, outs[r], cfg.opts...)
		}))
		if err != nil {
			return err
		}
		for r := range outs {
			if !bytes.Equal(outs[r], want) {
				return fmt.Errorf("rank %d: wrong gather (inplace=%v)", r, inPlace)
			}
		}
		return nil
	})
}

func TestReduceScatterMatrix(t *testing.T) {
	forEach(t, func(cfg config, n int, dt gpu.DType, count int, i int) error {
		op := reduce.Ops[i%len(reduce.Ops)]
		ts := local(n, cfg.plain)
		defer closeAll(ts)
		inputs := make([][]byte, n)
		for r := range inputs {
			inputs[r] = gen(dt, op, count, r, uint64(i))
		}
		want := reference(dt, op, inputs, count)
		inPlace := i%2 == 0
		work := make([][]byte, n)
		outs := make([][]byte, n)
		es := dt.Size()
		for r := range outs {
			lo, hi := algo.BlockRange(count, n, r)
			if inPlace {
				work[r] = bytes.Clone(inputs[r])
				outs[r] = work[r][lo*es : hi*es]
			} else {
				work[r] = inputs[r]
				outs[r] = make([]byte, (hi-lo)*es)
			}
		}
		err := firstErr(onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
			d := algo.Desc{Group: 3, Seq: uint64(i), DType: dt, Count: count, Op: op}
			return algo.ReduceScatter(ctx, tr, d, work[r], outs[r], cfg.opts...)
		}))
		if err != nil {
			return err
		}
		for r := range outs {
			lo, hi := algo.BlockRange(count, n, r)
			if err := check(dt, outs[r], want.slice(dt, lo, hi)); err != nil {
				return fmt.Errorf("rank %d %s (inplace=%v): %w", r, op, inPlace, err)
			}
		}
		return nil
	})
}

func TestBroadcastMatrix(t *testing.T) {
	forEach(t, func(cfg config, n int, dt gpu.DType, count int, i int) error {
		ts := local(n, cfg.plain)
		defer closeAll(ts)
		root := i % n
		want := gen(dt, reduce.Min, count, root, uint64(i))
		bufs := make([][]byte, n)
		for r := range bufs {
			bufs[r] = make([]byte, len(want))
		}
		copy(bufs[root], want)
		opts := append([]algo.Option{algo.WithChunkBytes(40)}, cfg.opts...)
		err := firstErr(onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
			return algo.Broadcast(ctx, tr, algo.Desc{Group: 4, Seq: uint64(i), DType: dt, Count: count, Root: root}, bufs[r], opts...)
		}))
		if err != nil {
			return err
		}
		for r := range bufs {
			if !bytes.Equal(bufs[r], want) {
				return fmt.Errorf("rank %d (root %d): wrong data", r, root)
			}
		}
		return nil
	})
}

// Every ordered pair exchanges, both directions at once (with 2 ranks the
// left and right neighbour are the same peer), several messages per pair
// matched in call order.
func TestSendRecv(t *testing.T) {
	for _, plain := range []bool{false, true} {
		for _, n := range []int{2, 3, 5} {
			for _, dt := range gpu.DTypes {
				for _, count := range []int{0, 1, 7, 1024} {
					ts := local(n, plain)
					msg := func(src, dst, k int) []byte {
						return gen(dt, reduce.Sum, count, src*16+dst*4+k, uint64(count))
					}
					const per = 2
					err := firstErr(onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
						errc := make(chan error, n)
						for p := 0; p < n; p++ {
							if p == r {
								continue
							}
							go func() {
								errc <- func() error {
									for k := 0; k < per; k++ {
										d := algo.Desc{Group: 5, Seq: uint64(k), DType: dt, Count: count, Peer: p}
										if err := algo.Send(ctx, tr, d, msg(r, p, k)); err != nil {
											return err
										}
									}
									return nil
								}()
							}()
							for k := 0; k < per; k++ {
								got := make([]byte, count*dt.Size())
								d := algo.Desc{Group: 5, Seq: uint64(k), DType: dt, Count: count, Peer: p}
								if err := algo.Recv(ctx, tr, d, got); err != nil {
									return err
								}
								if !bytes.Equal(got, msg(p, r, k)) {
									return fmt.Errorf("message %d from %d: wrong data", k, p)
								}
							}
						}
						var first error
						for p := 0; p < n-1; p++ {
							if err := <-errc; err != nil && first == nil {
								first = err
							}
						}
						return first
					}))
					closeAll(ts)
					if err != nil {
						t.Fatalf("plain=%v n=%d %s count=%d: %v", plain, n, dt, count, err)
					}
				}
			}
		}
	}
}

func TestBarrier(t *testing.T) {
	for _, plain := range []bool{false, true} {
		for _, n := range matrixRanks {
			ts := local(n, plain)
			arrived := make(chan int, n)
			err := firstErr(onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
				arrived <- r
				if err := algo.Barrier(ctx, tr, algo.Desc{Group: 6, Seq: 1}); err != nil {
					return err
				}
				if len(arrived) != n {
					return fmt.Errorf("left the barrier with %d of %d ranks arrived", len(arrived), n)
				}
				return nil
			}))
			closeAll(ts)
			if err != nil {
				t.Fatalf("plain=%v n=%d: %v", plain, n, err)
			}
		}
	}
}
