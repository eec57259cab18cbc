package algo

import (
	"context"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// AllReduce sets out to the reduction (d.Op) of every rank's in, elementwise.
// in and out hold d.Count elements of d.DType; out may be in (in place) but
// must not overlap it otherwise. Every rank gets bitwise the same result.
func AllReduce(ctx context.Context, t transport.Transport, d Desc, in, out []byte, opts ...Option) error {
	c := newColl(ctx, t, d, KindAllReduce, opts)
	return c.finish(c.allReduce(in, out))
}

func (c *coll) allReduce(in, out []byte) error {
	if err := c.checkBasic(); err != nil {
		return err
	}
	if err := c.checkLen("input", in, c.d.Count); err != nil {
		return err
	}
	if err := c.checkLen("output", out, c.d.Count); err != nil {
		return err
	}
	if reduce.Overlap(in, out) == reduce.Partial {
		return fmt.Errorf("output partially overlaps input: %w", ErrBadArgument)
	}
	if err := c.resolve(len(in), true); err != nil {
		return err
	}
	if c.n == 1 {
		return c.alone(out, in)
	}
	if c.alg == Direct {
		if c.small {
			return c.directAllReduceSmall(in, out)
		}
		return c.directAllReducePush(in, out)
	}
	if c.alg == Hierarchical {
		return c.hierAllReduce(in, out)
	}
	if c.alg == Doubling && c.n == 2 && c.pa == nil {
		return c.pairAllReduce(in, out)
	}
	if err := c.match(); err != nil {
		return err
	}
	dt := c.d.DType
	buf := out
	if isHalf(dt) {
		buf = widen(dt, in)
		in = buf
		dt = gpu.Float32
	}
	var err error
	if c.alg == Doubling {
		copyUnlessSame(buf, in) // doubling reduces in place
		err = c.doubling(dt, buf)
	} else {
		// The ring reads in and writes every block of buf (the
		// reduce-scatter reduces in into it, the all-gather fills the
		// rest), so buf needs no copy of in first.
		err = c.ring(c.blockSpec(dt, 0, 2*c.n-2, in, buf))
	}
	if err == nil && isHalf(c.d.DType) {
		narrow(c.d.DType, out, buf)
	}
	return err
}

// blockSpec is a ring over the BlockRange split of full-vector buffers of
// dt elements (Count of them).
func (c *coll) blockSpec(dt gpu.DType, g0, g1 int, in, acc []byte) ringSpec {
	es := dt.Size()
	part := func(buf []byte) func(int) []byte {
		return func(b int) []byte {
			lo, hi := BlockRange(c.d.Count, c.n, b)
			return buf[lo*es : hi*es]
		}
	}
	s := ringSpec{dt: dt, op: c.d.Op, chunk: max(es, c.o.ChunkBytes/es*es), g0: g0, g1: g1, acc: part(acc)}
	if in != nil {
		s.in = part(in)
	}
	return s
}

// chunkBytes is the chunk size, a multiple of the element size.
func (c *coll) chunkBytes() int {
	es := max(1, c.d.DType.Size())
	return max(es, c.o.ChunkBytes/es*es)
}

// resolve picks the algorithm from the options, the transport and the
// payload size; the match then checks all ranks picked the same.
func (c *coll) resolve(bytes int, doubling bool) error {
	c.alg = c.o.Algorithm
	if c.alg == Hierarchical && !c.hierFits() {
		c.alg = Auto // what Auto picks without it
	}
	switch c.alg {
	case Auto:
		switch {
		case c.pa != nil:
			c.alg = Direct
		case c.hierAuto(bytes) && c.hierFits():
			c.alg = Hierarchical
		case doubling && bytes <= c.o.SmallBytes:
			c.alg = Doubling
		default:
			c.alg = Ring
		}
	case Direct:
		if c.pa == nil {
			return fmt.Errorf("algorithm direct needs a transport with PeerAccess: %w", ErrBadArgument)
		}
	case Doubling:
		if !doubling {
			c.alg = Ring
		}
	case Ring, Hierarchical:
	default:
		return fmt.Errorf("unknown algorithm %d: %w", c.alg, ErrBadArgument)
	}
	c.small = c.alg == Direct && bytes <= c.o.DirectSmallBytes
	return nil
}

// alone completes the reduction of a group of one: its match, then out
// = in.
func (c *coll) alone(out, in []byte) error {
	if err := c.postMatch(); err != nil {
		return err
	}
	copyUnlessSame(out, in)
	return nil
}

func copyUnlessSame(dst, src []byte) {
	if reduce.Overlap(dst, src) != reduce.Identical {
		copy(dst, src)
	}
}
