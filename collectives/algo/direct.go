package algo

import (
	"bytes"

	"github.com/choreo-gpu/choreo/collectives/reduce"
)

// The direct algorithms run over a PeerAccess window: every rank reads its
// peers' buffers in place. The window's first buffer is the match signature
// (see matchWindow); then the buffers each algorithm lists. A rank's buffers
// are read by peers only until its last Sync returns.

// directAllReduce: phase 1, each rank reduces its block of the result
// straight from every rank's input into its own output (one pass, one
// rounding for half types); Sync; phase 2, it copies the other blocks from
// their owners' outputs; Sync. Each byte of the result is written once per
// rank. In place (out == in) is safe: in phase 1 rank r writes only block r
// of its buffer, which only it reads; phase 2 overwrites blocks whose reads
// ended with the first Sync.
func (c *coll) directAllReduce(in, out []byte) error {
	w, err := c.matchWindow(in, out)
	if err != nil {
		return err
	}
	defer w.Leave()
	es := c.d.DType.Size()
	lo, hi := BlockRange(c.d.Count, c.n, c.rank)
	srcs := make([][]byte, 0, c.n)
	srcs = append(srcs, in[lo*es:hi*es]) // own first: dst may alias srcs[0]
	for p := 0; p < c.n; p++ {
		if p != c.rank {
			srcs = append(srcs, w.Buffers(p)[1][lo*es:hi*es])
		}
	}
	if hi > lo {
		if err := reduce.Many(c.d.Op, c.d.DType, out[lo*es:hi*es], srcs...); err != nil {
			return err
		}
	}
	if err := w.Sync(c.ctx); err != nil {
		return err
	}
	for p := 0; p < c.n; p++ {
		if p == c.rank {
			continue
		}
		plo, phi := BlockRange(c.d.Count, c.n, p)
		copy(out[plo*es:phi*es], w.Buffers(p)[2][plo*es:phi*es])
	}
	return w.Sync(c.ctx)
}

// directAllReduceSmall: every rank reduces the whole vector from all inputs
// in rank order (so every rank gets bitwise the same result), then one
// Sync. Two barriers in all, the latency variant. In place, the result goes
// through a scratch buffer, since peers still read this rank's input.
func (c *coll) directAllReduceSmall(in, out []byte) error {
	w, err := c.matchWindow(in)
	if err != nil {
		return err
	}
	defer w.Leave()
	srcs := make([][]byte, c.n)
	for p := range srcs {
		srcs[p] = w.Buffers(p)[1]
	}
	dst := out
	if overlaps(in, out) {
		dst = make([]byte, len(out))
	}
	if len(dst) > 0 {
		if err := reduce.Many(c.d.Op, c.d.DType, dst, srcs...); err != nil {
			return err
		}
	}
	if err := w.Sync(c.ctx); err != nil {
		return err
	}
	if !sameSlice(dst, out) {
		copy(out, dst)
	}
	return nil
}

// directReduceScatter: each rank reduces its block from every rank's input
// into out; one Sync.
func (c *coll) directReduceScatter(in, out []byte) error {
	w, err := c.matchWindow(in)
	if err != nil {
		return err
	}
	defer w.Leave()
	es := c.d.DType.Size()
	lo, hi := BlockRange(c.d.Count, c.n, c.rank)
	srcs := make([][]byte, 0, c.n)
	srcs = append(srcs, in[lo*es:hi*es])
	for p := 0; p < c.n; p++ {
		if p != c.rank {
			srcs = append(srcs, w.Buffers(p)[1][lo*es:hi*es])
		}
	}
	dst := out
	if overlaps(out, in) && !sameSlice(out, srcs[0]) {
		dst = make([]byte, len(out))
	}
	if hi > lo {
		if err := reduce.Many(c.d.Op, c.d.DType, dst, srcs...); err != nil {
			return err
		}
	}
	if err := w.Sync(c.ctx); err != nil {
		return err
	}
	if !sameSlice(dst, out) {
		copy(out, dst)
	}
	return nil
}

// directAllGather: each rank copies every rank's input into its output;
// one Sync.
func (c *coll) directAllGather(in, out []byte) error {
	w, err := c.matchWindow(in)
	if err != nil {
		return err
	}
	defer w.Leave()
	l := len(in)
	own := out[c.rank*l : (c.rank+1)*l]
	if !sameSlice(own, in) {
		if overlaps(in, out) {
			// Peers still read in: write our slot from a copy at the end.
			defer func(in []byte) { copy(own, in) }(bytes.Clone(in))
		} else {
			copy(own, in)
		}
	}
	for p := 0; p < c.n; p++ {
		if p != c.rank {
			copy(out[p*l:(p+1)*l], w.Buffers(p)[1])
		}
	}
	return w.Sync(c.ctx)
}

// directBroadcast: every non-root rank copies the root's buffer; one Sync.
func (c *coll) directBroadcast(buf []byte) error {
	w, err := c.matchWindow(buf)
	if err != nil {
		return err
	}
	defer w.Leave()
	if c.rank != c.d.Root {
		copy(buf, w.Buffers(c.d.Root)[1])
	}
	return w.Sync(c.ctx)
}
