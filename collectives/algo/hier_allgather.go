package algo

// hierAllGather gathers every rank's in into out (rank order) in two
// levels, over the Topology's L ranks per host and m hosts, each block
// received straight into its slot of out:
//
//  1. the ranks of local index j on every host, a cross-host ring of m,
//     all-gather their slots (each host receives every other host's
//     slots once, spread over its L ranks);
//  2. inside each host, one ring all-gather per host hh at once, whose
//     block q is the slot of host hh's rank q (which that host's local
//     rank q holds after level 1, and so does local rank q here).
//
// No element is combined, so the result is bitwise every rank's input.
func (c *coll) hierAllGather(in, out []byte) error {
	if err := c.match(); err != nil {
		return err
	}
	t := c.o.Topology
	h, j := t.Host(c.rank), t.Local(c.rank)
	host := t.Ranks(h)
	l, m, sz := len(host), t.Hosts(), len(in)
	slot := func(r int) []byte { return out[r*sz : (r+1)*sz] }
	copyUnlessSame(slot(c.rank), in)
	chunk := c.chunkBytes()
	col := t.Column(j)
	cross := c.sub(col, h, hierStepCross, c.d.Count)
	err := cross.ring(ringSpec{dt: c.d.DType, chunk: chunk, g0: m - 1, g1: 2*m - 2,
		acc: func(b int) []byte { return slot(col[b]) }})
	if err != nil {
		return err
	}
	return c.rowRings(host, j, hierStepIntra2, m, func(hh int) ringSpec {
		row := t.Ranks(hh)
		return ringSpec{dt: c.d.DType, chunk: chunk, g0: l - 1, g1: 2*l - 2,
			acc: func(q int) []byte { return slot(row[q]) }}
	})
}
