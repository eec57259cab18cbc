package algo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// failTimeout is the deadline of a collective expected to fail by a
// mismatch, an abort or a lost peer: long, so that a slow machine never
// reaches it. The tests check that no rank's error is the deadline's
// (ErrTimeout), which proves the failure came the prompt way.
const failTimeout = 30 * time.Second

// call runs the collective d describes with fresh buffers.
func call(ctx context.Context, tr transport.Transport, d algo.Desc, opts ...algo.Option) error {
	n := tr.Size()
	buf := func(elems int) []byte { return make([]byte, max(0, elems)*max(1, d.DType.Size())) }
	switch d.Kind {
	case algo.KindAllReduce:
		return algo.AllReduce(ctx, tr, d, buf(d.Count), buf(d.Count), opts...)
	case algo.KindAllGather:
		return algo.AllGather(ctx, tr, d, buf(d.Count), buf(n*d.Count), opts...)
	case algo.KindReduceScatter:
		lo, hi := algo.BlockRange(d.Count, n, tr.Rank())
		return algo.ReduceScatter(ctx, tr, d, buf(d.Count), buf(hi-lo), opts...)
	case algo.KindBroadcast:
		return algo.Broadcast(ctx, tr, d, buf(d.Count), opts...)
	case algo.KindBarrier:
		return algo.Barrier(ctx, tr, d, opts...)
	}
	return fmt.Errorf("test: kind %v", d.Kind)
}

// TestMismatch: a rank that calls something else at the same Seq makes every rank
// fail with ErrMismatch (ErrShapeMismatch for count and dtype), promptly.
func TestMismatch(t *testing.T) {
	base := algo.Desc{Kind: algo.KindAllReduce, Group: 7, Seq: 3, DType: gpu.Float32, Count: 10, Op: reduce.Sum}
	variants := []struct {
		name  string
		odd   func(d algo.Desc) algo.Desc
		shape bool
		opts  []algo.Option // for the odd rank
	}{
		{"count", func(d algo.Desc) algo.Desc { d.Count = 11; return d }, true, nil},
		{"dtype", func(d algo.Desc) algo.Desc { d.DType = gpu.Int32; return d }, true, nil},
		{"op", func(d algo.Desc) algo.Desc { d.Op = reduce.Max; return d }, false, nil},
		{"kind", func(d algo.Desc) algo.Desc { d.Kind = algo.KindAllGather; return d }, false, nil},
		{"kind-barrier", func(d algo.Desc) algo.Desc { d.Kind = algo.KindBarrier; return d }, false, nil},
		{"root", func(d algo.Desc) algo.Desc { d.Kind = algo.KindBroadcast; return d }, false, nil},
		{"algorithm", func(d algo.Desc) algo.Desc { return d }, false, []algo.Option{algo.WithAlgorithm(algo.Ring)}},
	}
	for _, plain := range []bool{false, true} {
		for _, n := range []int{2, 3, 5} {
			for _, v := range variants {
				t.Run(fmt.Sprintf("plain=%v/n=%d/%s", plain, n, v.name), func(t *testing.T) {
					ts := local(n, plain)
					defer closeAll(ts)
					oddRank := n - 1
					errs := onRanks(t, ts, failTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
						d, opts := base, []algo.Option(nil)
						if v.name == "root" {
							d.Kind, d.Root = algo.KindBroadcast, 0
						}
						if r == oddRank {
							d, opts = v.odd(d), v.opts
							if v.name == "root" {
								d.Root = 1
							}
						}
						return call(ctx, tr, d, opts...)
					})
					for r, err := range errs {
						if !errors.Is(err, algo.ErrMismatch) || errors.Is(err, transport.ErrTimeout) {
							t.Fatalf("rank %d: got %v, want ErrMismatch (not the deadline)", r, err)
						}
						if v.shape != errors.Is(err, algo.ErrShapeMismatch) {
							t.Fatalf("rank %d: ErrShapeMismatch = %v, want %v: %v", r, !v.shape, v.shape, err)
						}
					}
				})
			}
		}
	}
}

// An invalid op, root or peer that all ranks agree on fails every rank with
// a clear error; so does a bad buffer on one rank (the others abort).
func TestBadArguments(t *testing.T) {
	for _, plain := range []bool{false, true} {
		ts := local(3, plain)
		for _, c := range []struct {
			d    algo.Desc
			want error
		}{
			{algo.Desc{Kind: algo.KindAllReduce, DType: gpu.Float32, Count: 4, Op: 0}, algo.ErrBadOp},
			{algo.Desc{Kind: algo.KindReduceScatter, DType: gpu.Float32, Count: 4, Op: 9}, algo.ErrBadOp},
			{algo.Desc{Kind: algo.KindBroadcast, DType: gpu.Int8, Count: 4, Root: 3}, algo.ErrBadArgument},
			{algo.Desc{Kind: algo.KindBroadcast, DType: gpu.Int8, Count: 4, Root: -1}, algo.ErrBadArgument},
			{algo.Desc{Kind: algo.KindAllGather, DType: gpu.Invalid, Count: 4}, algo.ErrBadArgument},
			{algo.Desc{Kind: algo.KindAllGather, DType: gpu.Float64, Count: -1}, algo.ErrBadArgument},
		} {
			c.d.Group, c.d.Seq = 8, uint64(c.d.Kind)*100+uint64(c.d.Op)+uint64(c.d.Root+10)
			errs := onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
				return call(ctx, tr, c.d)
			})
			for r, err := range errs {
				if !errors.Is(err, c.want) {
					t.Errorf("plain=%v %v: rank %d: got %v, want %v", plain, c.d, r, err, c.want)
				}
			}
		}
		// Point to point: peer out of range, or self.
		for _, p := range []int{-1, 0, 3} {
			err := algo.Send(context.Background(), ts[0], algo.Desc{Group: 8, DType: gpu.Float32, Count: 1, Peer: p}, make([]byte, 4))
			if !errors.Is(err, algo.ErrBadPeer) {
				t.Errorf("send to %d: %v", p, err)
			}
			err = algo.Recv(context.Background(), ts[0], algo.Desc{Group: 8, DType: gpu.Float32, Count: 1, Peer: p}, make([]byte, 4))
			if !errors.Is(err, algo.ErrBadPeer) {
				t.Errorf("recv from %d: %v", p, err)
			}
		}
		// One rank's output has the wrong size: it fails with
		// ErrBadArgument, the others with its abort, not at their deadline.
		errs := onRanks(t, ts, failTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
			d := algo.Desc{Group: 8, Seq: 999, DType: gpu.Float32, Count: 8, Op: reduce.Sum}
			out := make([]byte, 32)
			if r == 1 {
				out = out[:31]
			}
			return algo.AllReduce(ctx, tr, d, make([]byte, 32), out)
		})
		for r, err := range errs {
			want := transport.ErrAborted
			if r == 1 {
				want = algo.ErrBadArgument
			}
			if !errors.Is(err, want) || errors.Is(err, transport.ErrTimeout) {
				t.Fatalf("plain=%v bad buffer: rank %d: got %v, want %v (not the deadline)", plain, r, err, want)
			}
			var ae *transport.AbortError
			if r != 1 && (!errors.As(err, &ae) || ae.Origin != 1 || !errors.Is(err, algo.ErrBadArgument) ||
				!bytes.Contains([]byte(err.Error()), []byte("rank 1"))) {
				t.Fatalf("rank %d: abort error %q does not carry the cause from rank 1", r, err)
			}
		}
		closeAll(ts)
	}
}

// TestGroupOfOne: in a group of size 1 all-reduce/all-gather return the input; send and
// recv fail clearly.
func TestGroupOfOne(t *testing.T) {
	tr := transport.NewLocal(1)[0]
	defer tr.Close()
	ctx := context.Background()
	in := gen(gpu.Float32, reduce.Sum, 5, 0, 1)
	out := make([]byte, len(in))
	if err := algo.AllReduce(ctx, tr, algo.Desc{DType: gpu.Float32, Count: 5, Op: reduce.Sum}, in, out); err != nil || !bytes.Equal(in, out) {
		t.Fatalf("allreduce: %v", err)
	}
	if err := algo.AllReduce(ctx, tr, algo.Desc{DType: gpu.Float32, Count: 5, Op: reduce.Sum}, in, in); err != nil {
		t.Fatalf("allreduce in place: %v", err)
	}
	out2 := make([]byte, len(in))
	if err := algo.AllGather(ctx, tr, algo.Desc{DType: gpu.Float32, Count: 5}, in, out2); err != nil || !bytes.Equal(in, out2) {
		t.Fatalf("allgather: %v", err)
	}
	if err := algo.Send(ctx, tr, algo.Desc{DType: gpu.Float32, Count: 5}, in); !errors.Is(err, algo.ErrBadPeer) || !bytes.Contains([]byte(err.Error()), []byte("size 1")) {
		t.Fatalf("send: %v", err)
	}
	if err := algo.Recv(ctx, tr, algo.Desc{DType: gpu.Float32, Count: 5}, out); !errors.Is(err, algo.ErrBadPeer) {
		t.Fatalf("recv: %v", err)
	}
}

// faulty fails its Recv calls after the first `after` with an injected
// error, standing for a rank whose data plane breaks mid-collective.
type faulty struct {
	transport.Transport
	after int32
	n     atomic.Int32
}

var errInjected = errors.New("injected fault")

func (f *faulty) Recv(ctx context.Context, src int, tag transport.Tag, into []byte) error {
	if f.n.Add(1) > f.after {
		return errInjected
	}
	return f.Transport.Recv(ctx, src, tag, into)
}

// A rank that fails mid-collective aborts it: the others fail with
// ErrAborted naming it and the cause, not at their deadline.
func TestAbortMidCollective(t *testing.T) {
	for _, c := range []struct {
		name  string
		n     int
		count int
		opts  []algo.Option
		after int32
	}{
		{"ring", 4, 1 << 16, []algo.Option{algo.WithAlgorithm(algo.Ring), algo.WithChunkBytes(4096)}, 20},
		{"doubling", 5, 64, []algo.Option{algo.WithAlgorithm(algo.Doubling)}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := local(c.n, true)
			defer closeAll(ts)
			const bad = 2
			ts[bad] = &faulty{Transport: ts[bad], after: c.after}
			errs := onRanks(t, ts, failTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
				d := algo.Desc{Group: 9, Seq: 1, DType: gpu.Float32, Count: c.count, Op: reduce.Sum}
				return algo.AllReduce(ctx, tr, d, make([]byte, 4*c.count), make([]byte, 4*c.count), c.opts...)
			})
			for r, err := range errs {
				if r == bad {
					if !errors.Is(err, errInjected) {
						t.Fatalf("rank %d: got %v, want the injected fault", r, err)
					}
					continue
				}
				var ae *transport.AbortError
				if !errors.As(err, &ae) || ae.Origin != bad || !errors.Is(err, errInjected) || errors.Is(err, transport.ErrTimeout) {
					t.Fatalf("rank %d: got %v, want an abort by rank %d carrying the fault (not the deadline)", r, err, bad)
				}
			}
		})
	}
}

// A rank whose deadline passes fails with ErrTimeout; the others, with
// longer deadlines, fail with its abort, not at their own deadline
// (direct: window barrier; ring: messages).
func TestDeadlineAbortsOthers(t *testing.T) {
	for _, plain := range []bool{false, true} {
		ts := local(4, plain)
		var once sync.Once
		errs := onRanks(t, ts, failTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
			d := algo.Desc{Group: 10, Seq: 1, DType: gpu.Float32, Count: 1024, Op: reduce.Sum}
			switch r {
			case 3: // never shows up
				return nil
			case 0:
				c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
				ctx = c
			}
			once.Do(func() {})
			return algo.AllReduce(ctx, tr, d, make([]byte, 4096), make([]byte, 4096), algo.WithSmallBytes(-1))
		})
		if !errors.Is(errs[0], transport.ErrTimeout) || !errors.Is(errs[0], context.DeadlineExceeded) {
			t.Fatalf("plain=%v: rank 0: got %v, want ErrTimeout", plain, errs[0])
		}
		// Rank 0's abort carries its timeout as the cause: what proves the
		// others did not wait for their own deadline is the origin.
		for r := 1; r < 3; r++ {
			var ae *transport.AbortError
			if !errors.As(errs[r], &ae) || ae.Origin != 0 || !errors.Is(ae.Cause, transport.ErrTimeout) {
				t.Fatalf("plain=%v: rank %d: got %v, want rank 0's abort for its timeout", plain, r, errs[r])
			}
		}
		closeAll(ts)
	}
}

// A rank that closes its transport fails the others' collective with
// ErrPeerLost (or an abort that follows from it), not at their deadline.
func TestPeerLost(t *testing.T) {
	for _, plain := range []bool{false, true} {
		ts := local(3, plain)
		errs := onRanks(t, ts, failTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
			if r == 2 {
				time.Sleep(20 * time.Millisecond)
				return tr.Close()
			}
			d := algo.Desc{Group: 11, Seq: 1, DType: gpu.Float32, Count: 256, Op: reduce.Sum}
			return algo.AllReduce(ctx, tr, d, make([]byte, 1024), make([]byte, 1024), algo.WithAlgorithm(algo.Ring))
		})
		for r := 0; r < 2; r++ {
			if !errors.Is(errs[r], transport.ErrPeerLost) || errors.Is(errs[r], transport.ErrTimeout) {
				t.Fatalf("plain=%v rank %d: got %v, want ErrPeerLost (not the deadline)", plain, r, errs[r])
			}
		}
		closeAll(ts)
	}
}

// Many collectives in flight at once, on different Seqs and groups, each
// rank starting them in a different order.
func TestConcurrentCollectives(t *testing.T) {
	for _, cfg := range []config{configs[0], configs[1], configs[2], configs[4], configs[5]} {
		t.Run(cfg.name, func(t *testing.T) {
			const n, k, count = 4, 24, 100
			ts := local(n, cfg.plain)
			defer closeAll(ts)
			inputs := make([][][]byte, k)
			wants := make([]ref, k)
			for i := range inputs {
				inputs[i] = make([][]byte, n)
				for r := range inputs[i] {
					inputs[i][r] = gen(gpu.Int64, reduce.Sum, count, r, uint64(i))
				}
				wants[i] = reference(gpu.Int64, reduce.Sum, inputs[i], count)
			}
			errs := onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
				errc := make(chan error, k)
				order := rand.New(rand.NewPCG(uint64(r), 1)).Perm(k) // a different order on each rank
				for _, i := range order {
					go func() {
						d := algo.Desc{Group: uint64(i % 3), Seq: uint64(i), DType: gpu.Int64, Count: count, Op: reduce.Sum}
						out := make([]byte, 8*count)
						err := algo.AllReduce(ctx, tr, d, inputs[i][r], out, cfg.opts...)
						if err == nil {
							err = check(gpu.Int64, out, wants[i])
						}
						errc <- err
					}()
				}
				var first error
				for j := 0; j < k; j++ {
					if err := <-errc; err != nil && first == nil {
						first = err
					}
				}
				return first
			})
			noErrors(t, "concurrent", errs)
		})
	}
}

// Two ranks over messages all-reduce small payloads in one exchange that
// carries the match and the data (pairAllReduce). Whatever the other rank
// sent at that step, of the same size or not (an empty all-reduce sends
// exactly the match message, as every other collective does), both ranks
// reach the same precise verdict.
func TestPairMeetsOthers(t *testing.T) {
	base := algo.Desc{Kind: algo.KindAllReduce, Group: 9, Seq: 1, DType: gpu.Float32, Op: reduce.Sum}
	cases := []struct {
		name        string
		mine, other func(algo.Desc) algo.Desc
		want        error // nil: both succeed
		shape       bool
	}{
		{"empty", func(d algo.Desc) algo.Desc { return d }, func(d algo.Desc) algo.Desc { return d }, nil, false},
		{"empty-vs-one", func(d algo.Desc) algo.Desc { return d }, func(d algo.Desc) algo.Desc { d.Count = 1; return d }, algo.ErrMismatch, true},
		{"empty-vs-allgather", func(d algo.Desc) algo.Desc { return d },
			func(d algo.Desc) algo.Desc { d.Kind = algo.KindAllGather; return d }, algo.ErrMismatch, false},
		{"ten-vs-allgather", func(d algo.Desc) algo.Desc { d.Count = 10; return d },
			func(d algo.Desc) algo.Desc { d.Kind, d.Count = algo.KindAllGather, 10; return d }, algo.ErrMismatch, false},
		{"ten-vs-barrier", func(d algo.Desc) algo.Desc { d.Count = 10; return d },
			func(d algo.Desc) algo.Desc { d.Kind = algo.KindBarrier; return d }, algo.ErrMismatch, false},
		{"ten-vs-ten-int32", func(d algo.Desc) algo.Desc { d.Count = 10; return d },
			func(d algo.Desc) algo.Desc { d.Count, d.DType = 10, gpu.Int32; return d }, algo.ErrMismatch, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := local(2, true)
			defer closeAll(ts)
			errs := onRanks(t, ts, opTimeout, func(ctx context.Context, r int, tr transport.Transport) error {
				if r == 0 {
					return call(ctx, tr, c.mine(base))
				}
				return call(ctx, tr, c.other(base))
			})
			for r, err := range errs {
				if c.want == nil {
					if err != nil {
						t.Fatalf("rank %d: %v", r, err)
					}
					continue
				}
				if !errors.Is(err, c.want) || errors.Is(err, algo.ErrShapeMismatch) != c.shape {
					t.Fatalf("rank %d: got %v, want %v (shape %v)", r, err, c.want, c.shape)
				}
			}
		})
	}
}
