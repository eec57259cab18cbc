package algo

import "github.com/choreo-gpu/choreo/collectives/reduce"

// directGather: the root copies every rank's input into its output; one
// Sync, after which the peers may reuse their inputs.
func (c *coll) directGather(in, out []byte) error {
	w, err := c.matchWindow(in)
	if err != nil {
		return err
	}
	defer w.Leave()
	if l := len(in); c.rank == c.d.Root {
		for p := 0; p < c.n; p++ {
			copyUnlessSame(out[p*l:(p+1)*l], w.Buffers(p)[1])
		}
	}
	return w.Sync(c.ctx)
}

// directScatter: every rank copies its block of the root's input; one Sync.
func (c *coll) directScatter(in, out []byte) error {
	w, err := c.matchWindow(in)
	if err != nil {
		return err
	}
	defer w.Leave()
	l := len(out)
	copyUnlessSame(out, w.Buffers(c.d.Root)[1][c.rank*l:(c.rank+1)*l])
	return w.Sync(c.ctx)
}

// directReduce: each rank reduces its block of every rank's input straight
// into the root's output (one pass, one rounding for half types); one Sync.
func (c *coll) directReduce(in, out []byte) error {
	w, err := c.matchWindow(in, out)
	if err != nil {
		return err
	}
	defer w.Leave()
	es := c.d.DType.Size()
	lo, hi := BlockRange(c.d.Count, c.n, c.rank)
	if hi > lo {
		srcs := make([][]byte, c.n)
		for p := range srcs {
			srcs[p] = w.Buffers(p)[1][lo*es : hi*es]
		}
		if err := reduce.Many(c.d.Op, c.d.DType, w.Buffers(c.d.Root)[2][lo*es:hi*es], srcs...); err != nil {
			return err
		}
	}
	return w.Sync(c.ctx)
}
