package algo

import "github.com/choreo-gpu/choreo/gpu"

// hierReduceScatter reduces every rank's in and leaves block Rank of the
// result (BlockRange of Count over the group) in out, in two levels over
// the Topology's L ranks per host and m hosts, on a copy of in in column
// order (the blocks of the ranks of local index 0 in host order, then
// those of local index 1, ...), where both levels' blocks are contiguous:
//
//  1. inside each host, a ring reduce-scatter over the host's ranks leaves
//     the host's reduction of column j on the rank of local index j;
//  2. the ranks of local index j on every host, a cross-host ring of m,
//     reduce-scatter column j, each keeping its own block (each host sends
//     (m-1)/m of the vector across once, shared by its L ranks).
//
// Order of reduction: over the host's ranks first, then over the host
// partials, as in hierAllReduce; float16 and bfloat16 are reduced in
// float32 and rounded once.
func (c *coll) hierReduceScatter(in, out []byte) error {
	if err := c.match(); err != nil {
		return err
	}
	t := c.o.Topology
	h, j := t.Host(c.rank), t.Local(c.rank)
	host := t.Ranks(h)
	l, m := len(host), t.Hosts()
	dt, res := c.d.DType, out
	if isHalf(dt) {
		in, res, dt = widen(dt, in), make([]byte, len(out)*2), gpu.Float32
	}
	es := dt.Size()
	lay := newColumns(t, c.d.Count)
	cols := getScratch(len(in))
	defer putScratch(cols)
	for r := range c.n {
		lo, hi := BlockRange(c.d.Count, c.n, r)
		copy(cols[lay.at[r]*es:], in[lo*es:hi*es])
	}
	chunk := max(es, c.o.ChunkBytes/es*es)
	col := func(q int) []byte { return cols[lay.col[q]*es : lay.col[q+1]*es] }
	intra := c.sub(host, j, hierStepIntra1, lay.col[j+1]-lay.col[j])
	err := intra.ring(ringSpec{dt: dt, op: c.d.Op, chunk: chunk, g0: 0, g1: l - 1, in: col, acc: col})
	if err != nil {
		return err
	}
	block := func(b int) []byte {
		r := t.Ranks(b)[j]
		lo, hi := BlockRange(c.d.Count, c.n, r)
		return cols[lay.at[r]*es : (lay.at[r]+hi-lo)*es]
	}
	cross := c.sub(t.Column(j), h, hierStepCross, lay.col[j+1]-lay.col[j])
	err = cross.ring(ringSpec{dt: dt, op: c.d.Op, chunk: chunk, g0: 0, g1: m - 1, in: block,
		acc: func(b int) []byte {
			if b == h {
				return res
			}
			return block(b)
		}})
	if err != nil {
		return err
	}
	if isHalf(c.d.DType) {
		narrow(c.d.DType, out, res)
	}
	return nil
}

// columns lays out count elements split over the ranks by BlockRange in
// column order: the blocks of the ranks of local index 0 in host order,
// then those of local index 1, and so on. at[r] is where rank r's block
// starts, col[q] where column q starts (col[L] is count); elements.
type columns struct {
	at, col []int
}

func newColumns(t *Topology, count int) columns {
	n, l := t.Size(), len(t.Ranks(0))
	lay := columns{at: make([]int, n), col: make([]int, l+1)}
	off := 0
	for q := range l {
		lay.col[q] = off
		for hh := range t.Hosts() {
			r := t.Ranks(hh)[q]
			lay.at[r] = off
			lo, hi := BlockRange(count, n, r)
			off += hi - lo
		}
	}
	lay.col[l] = off
	return lay
}
