package algo

import (
	"bytes"
	"errors"
	"runtime"
	"sync"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
)

// The direct algorithms run over a PeerAccess window: every rank reads its
// peers' buffers in place. The window's first buffer is the match signature
// (see matchWindow); then the buffers each algorithm lists. A rank's buffers
// are read by peers only until its last Sync returns.

// pushChunk is the span a rank reduces at a time in directAllReducePush:
// small enough that the reduced chunk is still in cache while it is copied
// into every rank's output.
const pushChunk = 32 << 10

// directAllReducePush: each rank reduces its block, a cache-sized chunk at a
// time, from every rank's input into a scratch chunk (one pass, one rounding
// for half types) and writes it straight into every rank's output; then one
// Sync. Each output byte is written once, by its block's owner, and no
// result is read back, so no more bytes move and no more barriers are needed
// than the reduction itself takes. In place is safe: block b of every buffer
// is touched only by rank b, which reads a chunk of all inputs before
// writing it. A large block is split among helper goroutines, GOMAXPROCS/n
// per rank at most (every rank of a window runs in this process); each
// element is reduced the same way whatever the split.
func (c *coll) directAllReducePush(in, out []byte) error {
	w, err := c.matchWindow(in, out)
	if err != nil {
		return err
	}
	defer w.Leave()
	es := c.d.DType.Size()
	lo, hi := BlockRange(c.d.Count, c.n, c.rank)
	lo, hi = lo*es, hi*es
	// Every rank of the window runs in this process: share its processors
	// out, each rank's block split among helpers of its own.
	parts := min(max(1, runtime.GOMAXPROCS(0)/c.n), (hi-lo)/minPartBytes)
	if parts <= 1 {
		if err := c.pushRange(w, lo, hi); err != nil {
			return err
		}
		return w.Sync(c.ctx)
	}
	errs := make([]error, parts)
	var wg sync.WaitGroup
	n := (hi - lo) / es
	for i := range parts {
		a, b := lo+n*i/parts*es, lo+n*(i+1)/parts*es
		wg.Go(func() { errs[i] = c.pushRange(w, a, b) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return w.Sync(c.ctx)
}

// minPartBytes is the least a helper of directAllReducePush reduces: below
// it, starting a goroutine costs more than it saves.
const minPartBytes = 256 << 10

// pushRange reduces bytes [lo, hi) of every rank's input, a chunk at a
// time, and writes each reduced chunk into every rank's output.
func (c *coll) pushRange(w transport.Window, lo, hi int) error {
	es := c.d.DType.Size()
	step := max(es, pushChunk/es*es)
	tmp := getScratch(min(step, hi-lo))
	defer putScratch(tmp)
	srcs := make([][]byte, c.n)
	for off := lo; off < hi; off += step {
		end := min(off+step, hi)
		for p := range srcs {
			srcs[p] = w.Buffers(p)[1][off:end]
		}
		t := tmp[:end-off]
		if err := reduce.Many(c.d.Op, c.d.DType, t, srcs...); err != nil {
			return err
		}
		for p := 0; p < c.n; p++ {
			copy(w.Buffers(p)[2][off:end], t)
		}
	}
	return nil
}

// directAllReduceSmall: every rank reduces the whole vector from all inputs
// in rank order (so every rank gets bitwise the same result). The latency
// variant: one barrier (the Expose), because each rank exposes a private
// copy of its input that peers may read for as long as they need.
func (c *coll) directAllReduceSmall(in, out []byte) error {
	// Expose a private copy (the payload is small): peers may read it after
	// this rank returns, so no closing Sync is needed, and out may alias in.
	w, err := c.matchWindow(append([]byte(nil), in...))
	if err != nil {
		return err
	}
	defer w.Leave()
	srcs := make([][]byte, c.n)
	for p := range srcs {
		srcs[p] = w.Buffers(p)[1]
	}
	if len(out) == 0 {
		return nil
	}
	return reduce.Many(c.d.Op, c.d.DType, out, srcs...)
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
	if reduce.Overlap(out, in) != reduce.Disjoint && reduce.Overlap(out, srcs[0]) != reduce.Identical {
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
	if reduce.Overlap(dst, out) != reduce.Identical {
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
	if reduce.Overlap(own, in) != reduce.Identical {
		if reduce.Overlap(in, out) != reduce.Disjoint {
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
