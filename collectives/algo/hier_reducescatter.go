package algo

import "github.com/choreo-gpu/choreo/gpu"

// hierReduceScatter reduces every rank's in and leaves block Rank of the
// result (BlockRange of Count over the group) in out, in two levels over
// the Topology's L ranks per host and m hosts, through a work buffer laid
// out as in:
//
//  1. inside each host, one ring reduce-scatter per host hh at once,
//     whose block q is the final block of host hh's rank q: local rank j
//     ends with its host's reduction of the blocks of every rank of local
//     index j;
//  2. the ranks of local index j on every host, a cross-host ring of m,
//     reduce-scatter those blocks, each keeping its own (each host sends
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
	work := getScratch(len(in))
	defer putScratch(work)
	block := func(buf []byte, r int) []byte {
		lo, hi := BlockRange(c.d.Count, c.n, r)
		return buf[lo*es : hi*es]
	}
	chunk := max(es, c.o.ChunkBytes/es*es)
	err := c.rowRings(host, j, hierStepIntra1, m, func(hh int) ringSpec {
		row := t.Ranks(hh)
		return ringSpec{dt: dt, op: c.d.Op, chunk: chunk, g0: 0, g1: l - 1,
			in:  func(q int) []byte { return block(in, row[q]) },
			acc: func(q int) []byte { return block(work, row[q]) }}
	})
	if err != nil {
		return err
	}
	col := t.Column(j)
	cross := c.sub(col, h, hierStepCross, c.d.Count)
	err = cross.ring(ringSpec{dt: dt, op: c.d.Op, chunk: chunk, g0: 0, g1: m - 1,
		in: func(b int) []byte { return block(work, col[b]) },
		acc: func(b int) []byte {
			if b == h {
				return res
			}
			return block(work, col[b])
		}})
	if err != nil {
		return err
	}
	if isHalf(c.d.DType) {
		narrow(c.d.DType, out, res)
	}
	return nil
}
