package algo

import (
	"context"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// hierPartBytes and hierMaxParts cut an all-reduce in levels into a
// pipeline of parts (of at least hierPartBytes, at most hierMaxParts of
// them), so that while the hosts' ranks reduce-scatter part k+1 among
// themselves, the link between hosts carries part k. hierWindow is how
// many parts each level runs at once: two across hosts, so that the link
// carries the next part while one part's ring ends (its last chunks'
// round trips, its reduction before the all-gather step) and the link
// never drains between parts; one inside a host, where the early parts
// go first so that the link gets them early.
const (
	hierPartBytes = 4 << 20
	hierMaxParts  = 16
)

var hierWindow = [3]int{1, 2, 1}

// hierAllReduce all-reduces in into out in three levels, over the
// Topology's L ranks per host and m hosts:
//
//  1. inside each host, a ring reduce-scatter of the vector over the
//     host's ranks leaves the host's reduction of block j (BlockRange of
//     the count over L) on the rank of local index j;
//  2. the ranks of local index j on every host, a cross-host ring of m,
//     all-reduce block j (each host sends 2(m-1)/m of the vector across,
//     shared by its L ranks);
//  3. inside each host, a ring all-gather of the L blocks.
//
// A large vector runs as a pipeline of parts (hierPartBytes), each part
// through the three levels in turn, each level taking the parts in order,
// hierWindow of them at once: level 2 of part k-1, level 1 of parts k and
// k+1 and level 0 of part k+2 run together. Each part's rings, on every
// level, have steps of their own, and the L cross-host rings of a part
// (one per local index) run at once, each on its own ranks.
//
// Order of reduction: an element is reduced over its host's ranks first
// (in the ring order of the host), then over the m host partials (in the
// ring order of the hosts); a float sum therefore rounds in another order
// than the flat ring's, but every rank gets bitwise the same result (each
// block is reduced once, on one rank, and copied). float16 and bfloat16 are
// reduced in float32 and rounded once, as on the flat path; integer ops,
// min and max are exact whatever the order.
func (c *coll) hierAllReduce(in, out []byte) error {
	if err := c.match(); err != nil {
		return err
	}
	dt, buf := c.d.DType, out
	if isHalf(dt) {
		buf = widen(dt, in)
		in, dt = buf, gpu.Float32
	}
	es := dt.Size()
	part := hierPartBytes
	if c.o.hierPart > 0 {
		part = c.o.hierPart
	}
	parts := max(1, min(hierMaxParts, c.d.Count*es/part, c.d.Count))
	// done[lvl][p] is closed once part p has passed level lvl here.
	var done [3][]chan struct{}
	for lvl := range done {
		done[lvl] = make([]chan struct{}, parts)
		for p := range parts {
			done[lvl][p] = make(chan struct{})
		}
	}
	g := newTasks(c.ctx)
	for p := range parts {
		lo, hi := BlockRange(c.d.Count, parts, p)
		g.goDo(func() error {
			return c.hierAllReducePart(g.ctx, p, dt, in[lo*es:hi*es], buf[lo*es:hi*es], done)
		})
	}
	if err := g.wait(); err != nil {
		return err
	}
	if isHalf(c.d.DType) {
		narrow(c.d.DType, out, buf)
	}
	return nil
}

// hierAllReducePart runs part p (in into buf, elements of dt) through the
// three levels, each once part p-hierWindow[lvl] has passed it, on steps
// of its own: the parts of one residue modulo the window pass a level one
// after another, so at most hierWindow[lvl] parts run it at once.
func (c *coll) hierAllReducePart(ctx context.Context, p int, dt gpu.DType, in, buf []byte, done [3][]chan struct{}) error {
	t := c.o.Topology
	h, j := t.Host(c.rank), t.Local(c.rank)
	host := t.Ranks(h)
	l, m, es := len(host), t.Hosts(), dt.Size()
	count, off := len(buf)/es, uint32(p)*hierRowStep
	for lvl := range 3 {
		if w := hierWindow[lvl]; p >= w {
			select {
			case <-done[lvl][p-w]:
			case <-ctx.Done():
				return transport.CtxError(ctx)
			}
		}
		var s *coll
		var spec ringSpec
		switch lvl {
		case 0:
			s = c.sub(host, j, hierStepIntra1+off, count)
			spec = s.blockSpec(dt, 0, l-1, in, buf)
		case 1:
			lo, hi := BlockRange(count, l, j)
			blk := buf[lo*es : hi*es]
			s = c.sub(t.Column(j), h, hierStepCross+off, hi-lo)
			spec = s.blockSpec(dt, 0, 2*m-2, blk, blk)
		default:
			s = c.sub(host, j, hierStepIntra2+off, count)
			spec = s.blockSpec(dt, l-1, 2*l-2, nil, buf)
		}
		s.ctx = ctx
		err := s.ring(spec)
		close(done[lvl][p])
		if err != nil {
			return err
		}
	}
	return nil
}
