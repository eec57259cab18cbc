package algo

import (
	"context"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// ReduceScatter reduces every rank's in (d.Count elements) and leaves block
// Rank of the result in out: the elements BlockRange(d.Count, Size, Rank)
// (count/n each, the first count%n ranks one more; with d.Count < Size the
// last ranks get empty blocks). out may be in's own block (in place) but
// must not overlap in otherwise.
func ReduceScatter(ctx context.Context, t transport.Transport, d Desc, in, out []byte, opts ...Option) error {
	c := newColl(ctx, t, d, KindReduceScatter, opts)
	return c.finish(c.reduceScatter(in, out))
}

func (c *coll) reduceScatter(in, out []byte) error {
	if err := c.checkBasic(); err != nil {
		return err
	}
	if err := c.checkLen("input", in, c.d.Count); err != nil {
		return err
	}
	lo, hi := BlockRange(c.d.Count, c.n, c.rank)
	if err := c.checkLen("output", out, hi-lo); err != nil {
		return err
	}
	es := c.d.DType.Size()
	if reduce.Overlap(in, out) != reduce.Disjoint && reduce.Overlap(out, in[lo*es:hi*es]) != reduce.Identical {
		return fmt.Errorf("output overlaps input other than its own block: %w", ErrBadArgument)
	}
	if err := c.resolve(len(in), false); err != nil {
		return err
	}
	if c.n == 1 {
		return c.alone(out, in)
	}
	if c.alg == Direct {
		return c.directReduceScatter(in, out)
	}
	if c.alg == Hierarchical {
		return c.hierReduceScatter(in, out)
	}
	if err := c.match(); err != nil {
		return err
	}
	return c.ringReduceScatter(in, out)
}

// ringReduceScatter reduces every rank's in around the ring and leaves
// block Rank of the result in out (half types reduced in float32, rounded
// once).
func (c *coll) ringReduceScatter(in, out []byte) error {
	dt, res := c.d.DType, out
	if isHalf(dt) {
		in, res, dt = widen(dt, in), make([]byte, len(out)*2), gpu.Float32
	}
	// Blocks other than ours are reduced in a work buffer on their way.
	work := getScratch(len(in))
	defer putScratch(work)
	spec := c.blockSpec(dt, 0, c.n-1, in, work)
	acc := spec.acc
	spec.acc = func(b int) []byte {
		if b == c.rank {
			return res
		}
		return acc(b)
	}
	if err := c.ring(spec); err != nil {
		return err
	}
	if isHalf(c.d.DType) {
		narrow(c.d.DType, out, res)
	}
	return nil
}
