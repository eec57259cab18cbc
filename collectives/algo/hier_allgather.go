package algo

// hierAllGather gathers every rank's in into out (rank order) in two
// levels, over the Topology's L ranks per host and m hosts, through a
// buffer in column order (the slots of the ranks of local index 0 in host
// order, then those of local index 1, ...), where both levels' blocks are
// contiguous:
//
//  1. the ranks of local index j on every host, a cross-host ring of m,
//     all-gather their slots into column j (each host receives every
//     other host's slots once, spread over its L ranks);
//  2. inside each host, a ring all-gather of the L columns;
//
// and the columns are copied into out in rank order. No element is
// combined, so the result is bitwise every rank's input.
func (c *coll) hierAllGather(in, out []byte) error {
	if err := c.match(); err != nil {
		return err
	}
	t := c.o.Topology
	h, j := t.Host(c.rank), t.Local(c.rank)
	host := t.Ranks(h)
	l, m, sz := len(host), t.Hosts(), len(in)
	cols := getScratch(len(out))
	defer putScratch(cols)
	slot := func(q, hh int) []byte { return cols[(q*m+hh)*sz : (q*m+hh+1)*sz] }
	copy(slot(j, h), in)
	chunk := c.chunkBytes()
	cross := c.sub(t.Column(j), h, hierStepCross, c.d.Count)
	err := cross.ring(ringSpec{dt: c.d.DType, chunk: chunk, g0: m - 1, g1: 2*m - 2,
		acc: func(b int) []byte { return slot(j, b) }})
	if err != nil {
		return err
	}
	intra := c.sub(host, j, hierStepIntra2, c.d.Count)
	err = intra.ring(ringSpec{dt: c.d.DType, chunk: chunk, g0: l - 1, g1: 2*l - 2,
		acc: func(b int) []byte { return cols[b*m*sz : (b+1)*m*sz] }})
	if err != nil {
		return err
	}
	for q := range l {
		for hh := range m {
			r := t.Ranks(hh)[q]
			copy(out[r*sz:(r+1)*sz], slot(q, hh))
		}
	}
	return nil
}
