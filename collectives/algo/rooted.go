package algo

import (
	"context"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// Steps of the rooted collectives (gather, scatter, reduce).
const (
	stepRootTree   = stepData + 210 // a binomial tree's messages
	stepRootLinear = stepData + 211 // straight to or from the root
)

// Gather sets the root's out to every rank's in, in rank order: in holds
// d.Count elements on every rank, the root's out Size*d.Count (out is
// ignored elsewhere and may be nil). in may be the root's own slot of out.
//
// Small payloads (up to SmallBytes per rank) go up a binomial tree (log n
// steps); larger ones straight to the root, which receives them all at
// once into place. Over PeerAccess the root copies every input in place.
func Gather(ctx context.Context, t transport.Transport, d Desc, in, out []byte, opts ...Option) error {
	c := newColl(ctx, t, d, KindGather, opts)
	return c.finish(c.gather(in, out))
}

// Scatter sets every rank's out to block Rank of the root's in: the root's
// in holds Size*d.Count elements (in is ignored elsewhere and may be nil),
// every out d.Count. Small payloads go down a binomial tree, larger ones
// straight from the root; over PeerAccess each rank copies its block.
func Scatter(ctx context.Context, t transport.Transport, d Desc, in, out []byte, opts ...Option) error {
	c := newColl(ctx, t, d, KindScatter, opts)
	return c.finish(c.scatter(in, out))
}

// Reduce sets the root's out to the element-wise reduction (d.Op) of every
// rank's in (d.Count elements each; out is ignored off the root and may be
// nil). Half types are reduced in float32 and rounded once. Small payloads
// are reduced up a binomial tree; larger ones by a ring reduce-scatter whose
// blocks then go straight to the root; over PeerAccess each rank reduces
// its block of every input straight into the root's out. out must not
// overlap in.
func Reduce(ctx context.Context, t transport.Transport, d Desc, in, out []byte, opts ...Option) error {
	c := newColl(ctx, t, d, KindReduce, opts)
	return c.finish(c.reduceRoot(in, out))
}

// resolveRooted picks the algorithm of the collectives without an
// all-reduce's choice (all-to-all, gather, scatter, reduce): Direct over
// PeerAccess unless the options ask for messages (Ring or Doubling), and
// over messages the tree (c.small) for payloads up to SmallBytes, the
// bandwidth variant above.
func (c *coll) resolveRooted(bytes int) error {
	switch c.o.Algorithm {
	case Auto, Hierarchical: // no two-level variant: Auto's choice
		c.alg = Ring
		if c.pa != nil {
			c.alg = Direct
		}
	case Direct:
		if c.pa == nil {
			return fmt.Errorf("algorithm direct needs a transport with PeerAccess: %w", ErrBadArgument)
		}
		c.alg = Direct
	case Ring, Doubling:
		c.alg = Ring
	default:
		return fmt.Errorf("unknown algorithm %d: %w", c.o.Algorithm, ErrBadArgument)
	}
	c.small = c.alg == Ring && bytes <= c.o.SmallBytes
	return nil
}

// checkRooted validates the arguments of a rooted collective: the root's
// full buffer holds Size*count elements, the other count.
func (c *coll) checkRooted(part []byte, full []byte) error {
	if err := c.checkBasic(); err != nil {
		return err
	}
	if c.d.Root < 0 || c.d.Root >= c.n {
		return nil // every rank finds it in postMatch
	}
	if err := c.checkLen("block", part, c.d.Count); err != nil {
		return err
	}
	if c.rank == c.d.Root {
		if err := c.checkLen("root buffer", full, c.n*c.d.Count); err != nil {
			return err
		}
		own := full[c.rank*len(part) : (c.rank+1)*len(part)]
		if reduce.Overlap(part, full) != reduce.Disjoint && reduce.Overlap(part, own) != reduce.Identical {
			return fmt.Errorf("block overlaps the root's buffer other than in its own slot: %w", ErrBadArgument)
		}
	}
	return nil
}

// beginRooted is what gather and scatter do before their messages: the
// checks and the algorithm for a block part of the root's buffer full, a
// group of one (dst = src), the direct path, the match. done says the
// collective is over (with err).
func (c *coll) beginRooted(part, full, dst, src []byte, direct func() error) (done bool, err error) {
	if err := c.checkRooted(part, full); err != nil {
		return true, err
	}
	if err := c.resolveRooted(len(part)); err != nil {
		return true, err
	}
	switch {
	case c.n == 1:
		if err := c.postMatch(); err != nil {
			return true, err
		}
		copyUnlessSame(dst, src)
		return true, nil
	case c.alg == Direct:
		return true, direct()
	}
	return false, c.match()
}

func (c *coll) gather(in, out []byte) error {
	if done, err := c.beginRooted(in, out, out, in, func() error { return c.directGather(in, out) }); done || err != nil {
		return err
	}
	l, root := len(in), c.d.Root
	if !c.small {
		if c.rank != root {
			return c.t.Send(c.ctx, root, c.tag(stepRootLinear), in)
		}
		copyUnlessSame(out[root*l:(root+1)*l], in)
		return c.fromAll(stepRootLinear, func(p int) []byte { return out[p*l : (p+1)*l] })
	}
	bt := newBinomialTree(c.n, root, c.rank)
	// The subtree's blocks in relative rank order; at the root, rotated
	// into out at the end.
	sub := getScratch(bt.span * l)
	defer putScratch(sub)
	copy(sub, in)
	for i := len(bt.children) - 1; i >= 0; i-- { // smallest subtree first: it is ready first
		v := bt.childVR[i] - bt.vr
		if err := c.t.Recv(c.ctx, bt.children[i], c.tag(stepRootTree), sub[v*l:(v+bt.childSpan[i])*l]); err != nil {
			return err
		}
	}
	if bt.parent >= 0 {
		return c.t.Send(c.ctx, bt.parent, c.tag(stepRootTree), sub)
	}
	for v := 0; v < c.n; v++ {
		p := bt.abs(v)
		copyUnlessSame(out[p*l:(p+1)*l], sub[v*l:(v+1)*l])
	}
	return nil
}

func (c *coll) scatter(in, out []byte) error {
	if done, err := c.beginRooted(out, in, out, in, func() error { return c.directScatter(in, out) }); done || err != nil {
		return err
	}
	l, root := len(out), c.d.Root
	if !c.small {
		if c.rank != root {
			return c.t.Recv(c.ctx, root, c.tag(stepRootLinear), out)
		}
		err := c.toAll(stepRootLinear, func(p int) []byte { return in[p*l : (p+1)*l] })
		copyUnlessSame(out, in[root*l:(root+1)*l])
		return err
	}
	bt := newBinomialTree(c.n, root, c.rank)
	sub := getScratch(bt.span * l)
	defer putScratch(sub)
	if bt.parent < 0 {
		for v := 0; v < c.n; v++ {
			p := bt.abs(v)
			copy(sub[v*l:(v+1)*l], in[p*l:(p+1)*l])
		}
	} else if err := c.t.Recv(c.ctx, bt.parent, c.tag(stepRootTree), sub); err != nil {
		return err
	}
	for i, child := range bt.children { // largest subtree first: it has the furthest to go
		v := bt.childVR[i] - bt.vr
		if err := c.t.Send(c.ctx, child, c.tag(stepRootTree), sub[v*l:(v+bt.childSpan[i])*l]); err != nil {
			return err
		}
	}
	copyUnlessSame(out, sub[:l])
	return nil
}

// fromAll receives into(p) from every peer p at once.
func (c *coll) fromAll(step uint32, into func(p int) []byte) error {
	g := newTasks(c.ctx)
	for p := 0; p < c.n; p++ {
		if p != c.rank {
			g.goDo(func() error { return c.t.Recv(g.ctx, p, c.tag(step), into(p)) })
		}
	}
	return g.wait()
}

// toAll sends what(p) to every peer p at once.
func (c *coll) toAll(step uint32, what func(p int) []byte) error {
	g := newTasks(c.ctx)
	for p := 0; p < c.n; p++ {
		if p != c.rank {
			g.goDo(func() error { return c.t.Send(g.ctx, p, c.tag(step), what(p)) })
		}
	}
	return g.wait()
}

func (c *coll) reduceRoot(in, out []byte) error {
	if err := c.checkBasic(); err != nil {
		return err
	}
	if err := c.checkLen("input", in, c.d.Count); err != nil {
		return err
	}
	if c.rank == c.d.Root {
		if err := c.checkLen("output", out, c.d.Count); err != nil {
			return err
		}
		if len(in) > 0 && reduce.Overlap(in, out) != reduce.Disjoint {
			return fmt.Errorf("output overlaps input: %w", ErrBadArgument)
		}
	}
	if err := c.resolveRooted(len(in)); err != nil {
		return err
	}
	if c.n == 1 {
		return c.alone(out, in)
	}
	if c.alg == Direct {
		return c.directReduce(in, out)
	}
	if err := c.match(); err != nil {
		return err
	}
	if !c.small {
		return c.reduceByBlocks(in, out)
	}
	dt, acc := c.d.DType, in
	if isHalf(dt) {
		dt, acc = gpu.Float32, widen(dt, in)
	} else {
		acc = append(getScratch(len(in))[:0], in...)
		defer putScratch(acc)
	}
	bt := newBinomialTree(c.n, c.d.Root, c.rank)
	got := getScratch(len(acc))
	defer putScratch(got)
	for i := len(bt.children) - 1; i >= 0; i-- {
		if err := c.t.Recv(c.ctx, bt.children[i], c.tag(stepRootTree), got); err != nil {
			return err
		}
		if err := reduce.Into(c.d.Op, dt, acc, got); err != nil {
			return err
		}
	}
	if bt.parent >= 0 {
		return c.t.Send(c.ctx, bt.parent, c.tag(stepRootTree), acc)
	}
	if isHalf(c.d.DType) {
		narrow(c.d.DType, out, acc)
	} else {
		copy(out, acc)
	}
	return nil
}

// reduceByBlocks is Reduce's bandwidth variant: a ring reduce-scatter
// leaves block r of the result on rank r (the root's straight in its out),
// and every other rank sends its block to the root.
func (c *coll) reduceByBlocks(in, out []byte) error {
	es, root := c.d.DType.Size(), c.d.Root
	lo, hi := BlockRange(c.d.Count, c.n, c.rank)
	var mine []byte
	if c.rank == root {
		mine = out[lo*es : hi*es]
	} else {
		mine = getScratch((hi - lo) * es)
		defer putScratch(mine)
	}
	if err := c.ringReduceScatter(in, mine); err != nil {
		return err
	}
	if c.rank != root {
		return c.t.Send(c.ctx, root, c.tag(stepRootLinear), mine)
	}
	return c.fromAll(stepRootLinear, func(p int) []byte {
		lo, hi := BlockRange(c.d.Count, c.n, p)
		return out[lo*es : hi*es]
	})
}
