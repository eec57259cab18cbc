package collectives

import (
	"context"
	"fmt"
	"slices"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

func callConf(opts []CallOption) callConfig {
	var c callConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}

func descOf(kind algo.Kind, x *array.Array) algo.Desc {
	d := algo.Desc{Kind: kind}
	if x != nil {
		d.DType, d.Count = x.DType(), x.Size()
	}
	return d
}

func nilInput(op string, g *Group) error {
	return fmt.Errorf("collectives: %s rank %d: nil input: %w", op, g.Rank(), ErrBadArgument)
}

// AllReduce returns, at once, the element-wise reduction of x over every
// rank of the group; every rank gets the whole result. In a group of size 1
// the result equals x.
func (g *Group) AllReduce(s *streams.GPU, x *array.Array, op Op, opts ...CallOption) (*array.Array, error) {
	if x == nil {
		return nil, g.abortWith(nilInput("allreduce", g))
	}
	d := descOf(algo.KindAllReduce, x)
	d.Op = op
	algoOpts := g.cfg.algo
	return g.launch(plan{desc: d, s: s, in: x, hasOut: true, outShape: x.Shape(), outDType: x.DType(), donate: callConf(opts).donate,
		run: func(ctx context.Context, d algo.Desc, in, out []byte) error {
			return algo.AllReduce(ctx, g.t, d, in, out, algoOpts...)
		}})
}

// AllGather returns, at once, the ranks' inputs stacked in rank order along
// a new leading axis: shape [Size(), x.Shape()...].
func (g *Group) AllGather(s *streams.GPU, x *array.Array) (*array.Array, error) {
	if x == nil {
		return nil, g.abortWith(nilInput("allgather", g))
	}
	algoOpts := g.cfg.algo
	return g.launch(plan{desc: descOf(algo.KindAllGather, x), s: s, in: x,
		hasOut: true, outShape: append([]int{g.Size()}, x.Shape()...), outDType: x.DType(),
		run: func(ctx context.Context, d algo.Desc, in, out []byte) error {
			return algo.AllGather(ctx, g.t, d, in, out, algoOpts...)
		}})
}

// ReduceScatter reduces x over the ranks and leaves block Rank() of the
// flattened result on this rank, as a 1-D array: blocks split the elements
// as evenly as possible, the first ones one element longer (see
// algo.BlockRange); with fewer elements than ranks the last blocks are empty.
func (g *Group) ReduceScatter(s *streams.GPU, x *array.Array, op Op) (*array.Array, error) {
	if x == nil {
		return nil, g.abortWith(nilInput("reducescatter", g))
	}
	d := descOf(algo.KindReduceScatter, x)
	d.Op = op
	lo, hi := algo.BlockRange(x.Size(), g.Size(), g.Rank())
	algoOpts := g.cfg.algo
	return g.launch(plan{desc: d, s: s, in: x, hasOut: true, outShape: []int{hi - lo}, outDType: x.DType(),
		run: func(ctx context.Context, d algo.Desc, in, out []byte) error {
			return algo.ReduceScatter(ctx, g.t, d, in, out, algoOpts...)
		}})
}

// Broadcast returns, at once, root's x on every rank (every rank passes an x
// of the same shape and dtype; only root's contents matter).
func (g *Group) Broadcast(s *streams.GPU, x *array.Array, root int) (*array.Array, error) {
	if x == nil {
		return nil, g.abortWith(nilInput("broadcast", g))
	}
	d := descOf(algo.KindBroadcast, x)
	d.Root = root
	algoOpts := g.cfg.algo
	return g.launch(plan{desc: d, s: s, in: x, hasOut: true, outShape: x.Shape(), outDType: x.DType(),
		run: func(ctx context.Context, d algo.Desc, in, out []byte) error {
			copy(out, in)
			return algo.Broadcast(ctx, g.t, d, out, algoOpts...)
		}})
}

// Send sends x to rank dst, which must call Recv with the same shape and
// dtype; the k-th Send to dst meets dst's k-th Recv from this rank. It
// returns at once; a failure shows in Wait.
func (g *Group) Send(s *streams.GPU, x *array.Array, dst int) error {
	_, err := g.launch(g.sendPlan(s, x, dst))
	return err
}

func (g *Group) sendPlan(s *streams.GPU, x *array.Array, dst int) plan {
	d := descOf(algo.KindSend, x)
	d.Peer = dst
	if x == nil { // refused, but in its place: dst's matching Recv fails at once
		return plan{desc: d, s: s, p2p: true, refused: nilInput("send", g)}
	}
	algoOpts := g.cfg.algo
	return plan{desc: d, s: s, in: x, p2p: true,
		run: func(ctx context.Context, d algo.Desc, in, _ []byte) error {
			return algo.Send(ctx, g.t, d, in, algoOpts...)
		}}
}

// Recv returns, at once, an array of the given shape and dtype that receives
// what rank src sends.
func (g *Group) Recv(s *streams.GPU, shape []int, dt gpu.DType, src int) (*array.Array, error) {
	return g.launch(g.recvPlan(s, shape, dt, src))
}

func (g *Group) recvPlan(s *streams.GPU, shape []int, dt gpu.DType, src int) plan {
	d := algo.Desc{Kind: algo.KindRecv, DType: dt, Peer: src}
	var refused error
	if !dt.Valid() {
		refused = fmt.Errorf("collectives: recv rank %d: dtype %v: %w", g.Rank(), dt, ErrBadArgument)
	}
	for _, n := range shape {
		if n < 0 {
			refused = fmt.Errorf("collectives: recv rank %d: shape %v: %w", g.Rank(), shape, ErrBadArgument)
		}
	}
	if refused != nil { // in its place: src's matching Send fails at once
		return plan{desc: d, s: s, p2p: true, refused: refused}
	}
	d.Count = sizeOf(shape)
	algoOpts := g.cfg.algo
	return plan{desc: d, s: s, hasOut: true, outShape: slices.Clone(shape), outDType: dt, p2p: true,
		run: func(ctx context.Context, d algo.Desc, _, out []byte) error {
			return algo.Recv(ctx, g.t, d, out, algoOpts...)
		}}
}

// Barrier returns once every rank of the group has reached it (and this
// rank's earlier collectives have finished), or with an error when ctx or
// the group's timeout ends first.
func (g *Group) Barrier(ctx context.Context) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return fmt.Errorf("collectives: barrier rank %d: %w", g.Rank(), ErrClosed)
	}
	g.seq++
	d := algo.Desc{Kind: algo.KindBarrier, Group: g.id, Seq: g.seq, DType: gpu.Uint8}
	g.board.arrive(g.Rank(), d.Seq)
	if b := boardOf(g); b != nil { // a peer's collective waiting on its input meets it now
		b.post(&callSig{rank: g.Rank(), seq: d.Seq, d: d})
	}
	wait, err := g.onComm("barrier", func(cctx context.Context) error {
		if dl, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			cctx, cancel = context.WithDeadline(cctx, dl)
			defer cancel()
		}
		return algo.Barrier(cctx, g.t, d, g.cfg.algo...)
	})
	g.mu.Unlock()
	if err == nil {
		err = wait(ctx)
	}
	if err != nil {
		return g.closedErr(g.opError(opLabel{"barrier", g.id, g.Rank(), d.Seq}, err))
	}
	return nil
}

// abortWith consumes the group's next sequence number for a call that
// failed before it could start and aborts it for the peers, so they fail
// at once instead of waiting for this rank.
func (g *Group) abortWith(err error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.seq++
		g.t.Abort(algoTag(g.id, g.seq), err)
	}
	return err
}
