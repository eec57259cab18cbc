package collectives

import (
	"context"
	"fmt"
	"slices"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/streams"
)

// AllToAll splits x along its first axis into Size() equal blocks, sends
// block j to rank j and returns, at once, an array of x's shape holding the
// blocks every rank sent this one, in rank order. x's first axis must be a
// multiple of Size(); every rank must pass the same shape and dtype, or
// every rank fails with ErrShapeMismatch. In a group of size 1 the result
// equals x.
func (g *Group) AllToAll(s *streams.GPU, x *array.Array) (*array.Array, error) {
	if x == nil {
		return nil, g.abortWith(nilInput("alltoall", g))
	}
	if len(x.Shape()) == 0 || x.Shape()[0]%g.Size() != 0 {
		return nil, g.abortWith(fmt.Errorf("collectives: alltoall rank %d: shape %v: the first axis must split into %d equal blocks: %w",
			g.Rank(), x.Shape(), g.Size(), ErrBadArgument))
	}
	rows := x.Shape()[0] / g.Size()
	counts := make([]int, g.Size())
	for j := range counts {
		counts[j] = rows
	}
	return g.allToAll(s, x, counts, counts, x.Shape(), true)
}

// AllToAllV sends sendCounts[j] rows of x (along its first axis, in order)
// to rank j and returns, at once, the rows every rank sent this one, in rank
// order: shape [sum(recvCounts), x.Shape()[1:]...]. Counts may be zero.
// Rank i's sendCounts[j] must equal rank j's recvCounts[i], and every rank
// must pass rows of the same shape and dtype: otherwise every rank fails
// with ErrShapeMismatch, naming the first pair that disagrees.
func (g *Group) AllToAllV(s *streams.GPU, x *array.Array, sendCounts, recvCounts []int) (*array.Array, error) {
	if x == nil {
		return nil, g.abortWith(nilInput("alltoallv", g))
	}
	bad := func(why string, args ...any) (*array.Array, error) {
		return nil, g.abortWith(fmt.Errorf("collectives: alltoallv rank %d: %s: %w", g.Rank(), fmt.Sprintf(why, args...), ErrBadArgument))
	}
	if len(x.Shape()) == 0 {
		return bad("a scalar has no rows to split")
	}
	if len(sendCounts) != g.Size() || len(recvCounts) != g.Size() {
		return bad("%d send and %d receive counts in a group of %d", len(sendCounts), len(recvCounts), g.Size())
	}
	sent, got := 0, 0
	for j := range sendCounts {
		if sendCounts[j] < 0 || recvCounts[j] < 0 {
			return bad("negative count for rank %d (send %d, receive %d)", j, sendCounts[j], recvCounts[j])
		}
		sent += sendCounts[j]
		got += recvCounts[j]
	}
	if sent != x.Shape()[0] {
		return bad("send counts add up to %d rows, x has %d", sent, x.Shape()[0])
	}
	return g.allToAll(s, x, slices.Clone(sendCounts), slices.Clone(recvCounts), append([]int{got}, x.Shape()[1:]...), false)
}

// allToAll launches an all-to-all of rows of x; counts are in rows; even
// says every block has the same rows (AllToAll).
func (g *Group) allToAll(s *streams.GPU, x *array.Array, sendRows, recvRows []int, outShape []int, even bool) (*array.Array, error) {
	row := sizeOf(x.Shape()[1:])
	send, recv := make([]int, len(sendRows)), make([]int, len(recvRows))
	for j := range sendRows {
		send[j], recv[j] = sendRows[j]*row, recvRows[j]*row
	}
	algoOpts := g.cfg.algo
	return g.launch(plan{desc: descOf(algo.KindAllToAll, x), s: s, in: x, hasOut: true, outShape: outShape, outDType: x.DType(), even: even,
		run: func(ctx context.Context, d algo.Desc, in, out []byte) error {
			return algo.AllToAll(ctx, g.t, d, in, out, send, recv, algoOpts...)
		}})
}

// Gather returns, at once on root, the ranks' inputs stacked in rank order
// along a new leading axis: shape [Size(), x.Shape()...]. Every rank passes
// an x of the same shape and dtype. The other ranks get a nil array; their
// part's failure shows in Wait.
func (g *Group) Gather(s *streams.GPU, x *array.Array, root int) (*array.Array, error) {
	if x == nil {
		return nil, g.abortWith(nilInput("gather", g))
	}
	d := descOf(algo.KindGather, x)
	d.Root = root
	isRoot := g.Rank() == root
	algoOpts := g.cfg.algo
	return g.launch(plan{desc: d, s: s, in: x, hasOut: isRoot, outShape: append([]int{g.Size()}, x.Shape()...), outDType: x.DType(),
		run: func(ctx context.Context, d algo.Desc, in, out []byte) error {
			return algo.Gather(ctx, g.t, d, in, out, algoOpts...)
		}})
}

// Scatter returns, at once, block Rank() of root's x along its first axis:
// every rank passes an x of shape [Size(), ...] and the same dtype (only
// root's contents are read) and gets an array of shape x.Shape()[1:].
func (g *Group) Scatter(s *streams.GPU, x *array.Array, root int) (*array.Array, error) {
	if x == nil {
		return nil, g.abortWith(nilInput("scatter", g))
	}
	if len(x.Shape()) == 0 || x.Shape()[0] != g.Size() {
		return nil, g.abortWith(fmt.Errorf("collectives: scatter rank %d: shape %v: the first axis must be the group size %d: %w",
			g.Rank(), x.Shape(), g.Size(), ErrBadArgument))
	}
	d := descOf(algo.KindScatter, x)
	d.Count, d.Root = sizeOf(x.Shape()[1:]), root
	var in *array.Array // only the root's contents travel: the others stage nothing
	if g.Rank() == root {
		in = x
	}
	algoOpts := g.cfg.algo
	return g.launch(plan{desc: d, s: s, in: in, hasOut: true, outShape: slices.Clone(x.Shape()[1:]), outDType: x.DType(),
		run: func(ctx context.Context, d algo.Desc, in, out []byte) error {
			return algo.Scatter(ctx, g.t, d, in, out, algoOpts...)
		}})
}

// Reduce returns, at once on root, the element-wise reduction of x over
// every rank (x's shape and dtype). The other ranks get a nil array; their
// part's failure shows in Wait. In a group of size 1 the result equals x.
func (g *Group) Reduce(s *streams.GPU, x *array.Array, op Op, root int) (*array.Array, error) {
	if x == nil {
		return nil, g.abortWith(nilInput("reduce", g))
	}
	d := descOf(algo.KindReduce, x)
	d.Op, d.Root = op, root
	algoOpts := g.cfg.algo
	return g.launch(plan{desc: d, s: s, in: x, hasOut: g.Rank() == root, outShape: x.Shape(), outDType: x.DType(),
		run: func(ctx context.Context, d algo.Desc, in, out []byte) error {
			return algo.Reduce(ctx, g.t, d, in, out, algoOpts...)
		}})
}
