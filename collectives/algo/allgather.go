package algo

import (
	"context"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
)

// AllGather sets out to every rank's in, in rank order: in holds d.Count
// elements, out Size*d.Count. in may be out's own slot (in place) but must
// not overlap out otherwise.
func AllGather(ctx context.Context, t transport.Transport, d Desc, in, out []byte, opts ...Option) error {
	c := newColl(ctx, t, d, KindAllGather, opts)
	return c.finish(c.allGather(in, out))
}

// Split is AllGather under its own kind (KindSplit): Group.Split gathers
// every rank's (color, key) with it, and the match tells it apart from an
// AllGather of the same shape called at the same position.
func Split(ctx context.Context, t transport.Transport, d Desc, in, out []byte, opts ...Option) error {
	c := newColl(ctx, t, d, KindSplit, opts)
	return c.finish(c.allGather(in, out))
}

func (c *coll) allGather(in, out []byte) error {
	if err := c.checkBasic(); err != nil {
		return err
	}
	if err := c.checkLen("input", in, c.d.Count); err != nil {
		return err
	}
	if err := c.checkLen("output", out, c.n*c.d.Count); err != nil {
		return err
	}
	l := len(in)
	own := out[c.rank*l : (c.rank+1)*l]
	if reduce.Overlap(in, out) != reduce.Disjoint && reduce.Overlap(in, own) != reduce.Identical {
		return fmt.Errorf("input overlaps output other than in its own slot: %w", ErrBadArgument)
	}
	if err := c.resolve(l, false); err != nil {
		return err
	}
	if c.n == 1 {
		copyUnlessSame(out, in)
		return nil
	}
	if c.alg == Direct {
		return c.directAllGather(in, out)
	}
	if c.alg == Hierarchical {
		return c.hierAllGather(in, out)
	}
	if err := c.match(); err != nil {
		return err
	}
	copyUnlessSame(own, in)
	spec := ringSpec{
		dt: c.d.DType, chunk: c.chunkBytes(), g0: c.n - 1, g1: 2*c.n - 2,
		acc: func(b int) []byte { return out[b*l : (b+1)*l] },
	}
	return c.ring(spec)
}
