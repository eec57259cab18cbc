package algo

import "github.com/choreo-gpu/choreo/gpu"

// hierAllReduce all-reduces in into out in three levels, over the
// Topology's L ranks per host and m hosts:
//
//  1. inside each host, a ring reduce-scatter of the whole vector over the
//     host's ranks leaves the host's reduction of block j (BlockRange of
//     Count over L) on the rank of local index j;
//  2. the ranks of local index j on every host, a cross-host ring of m,
//     all-reduce block j (each host sends (m-1)/m of the vector twice
//     across, shared by its L ranks);
//  3. inside each host, a ring all-gather of the L blocks.
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
	t := c.o.Topology
	h, j := t.Host(c.rank), t.Local(c.rank)
	host := t.Ranks(h)
	l, m := len(host), t.Hosts()
	dt, buf := c.d.DType, out
	if isHalf(dt) {
		buf = widen(dt, in)
		in, dt = buf, gpu.Float32
	}
	intra := c.sub(host, j, hierStepIntra1, c.d.Count)
	if err := intra.ring(intra.blockSpec(dt, 0, l-1, in, buf)); err != nil {
		return err
	}
	lo, hi := BlockRange(c.d.Count, l, j)
	es := dt.Size()
	blk := buf[lo*es : hi*es]
	cross := c.sub(t.Column(j), h, hierStepCross, hi-lo)
	if err := cross.ring(cross.blockSpec(dt, 0, 2*m-2, blk, blk)); err != nil {
		return err
	}
	gather := c.sub(host, j, hierStepIntra2, c.d.Count)
	if err := gather.ring(gather.blockSpec(dt, l-1, 2*l-2, nil, buf)); err != nil {
		return err
	}
	if isHalf(c.d.DType) {
		narrow(c.d.DType, out, buf)
	}
	return nil
}
