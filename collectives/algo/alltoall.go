package algo

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
)

// stepAllToAll carries an all-to-all's blocks: each ordered pair of ranks
// exchanges exactly one message on it.
const stepAllToAll = stepData + 200

// AllToAll sends block j of in to rank j and receives rank j's block for
// this rank into block j of out. sendCounts[j] and recvCounts[j] are the
// element counts of block j; the blocks lie contiguously in rank order, so
// in holds sum(sendCounts) = d.Count elements and out sum(recvCounts).
// Every rank i's sendCounts[j] must equal rank j's recvCounts[i]: the match
// checks the whole matrix on every rank, so a disagreement fails every rank
// with the same ErrShapeMismatch. in and out must not overlap.
//
// Over PeerAccess each rank copies its blocks straight out of its peers'
// inputs (one Sync); over messages every pair exchanges its two blocks at
// once (pairwise exchange, all pairs in flight).
func AllToAll(ctx context.Context, t transport.Transport, d Desc, in, out []byte, sendCounts, recvCounts []int, opts ...Option) error {
	c := newColl(ctx, t, d, KindAllToAll, opts)
	return c.finish(c.allToAll(in, out, sendCounts, recvCounts))
}

// blocks lays counts elements of es bytes out contiguously: block j is
// [off[j], off[j+1]).
func blocks(counts []int, es int) []int {
	off := make([]int, len(counts)+1)
	for j, k := range counts {
		off[j+1] = off[j] + k*es
	}
	return off
}

func (c *coll) allToAll(in, out []byte, sendCounts, recvCounts []int) error {
	if err := c.checkBasic(); err != nil {
		return err
	}
	if len(sendCounts) != c.n || len(recvCounts) != c.n {
		return fmt.Errorf("%d send and %d receive counts for %d ranks: %w", len(sendCounts), len(recvCounts), c.n, ErrBadArgument)
	}
	sum := func(counts []int) (int, error) {
		s := 0
		for j, k := range counts {
			if k < 0 {
				return 0, fmt.Errorf("count %d for rank %d: %w", k, j, ErrBadArgument)
			}
			s += k
		}
		return s, nil
	}
	ns, err := sum(sendCounts)
	if err != nil {
		return err
	}
	nr, err := sum(recvCounts)
	if err != nil {
		return err
	}
	if ns != c.d.Count {
		return fmt.Errorf("send counts add up to %d, the descriptor says %d: %w", ns, c.d.Count, ErrBadArgument)
	}
	if err := c.checkLen("input", in, ns); err != nil {
		return err
	}
	if err := c.checkLen("output", out, nr); err != nil {
		return err
	}
	if reduce.Overlap(in, out) != reduce.Disjoint {
		return fmt.Errorf("input and output overlap: %w", ErrBadArgument)
	}
	if err := c.resolveRooted(0); err != nil {
		return err
	}
	c.small = false // one algorithm over messages, whatever the size
	es := c.d.DType.Size()
	so, ro := blocks(sendCounts, es), blocks(recvCounts, es)
	counts := encodeCounts(sendCounts, recvCounts)
	if c.n == 1 {
		if err := checkCounts([][]byte{counts}); err != nil {
			return err
		}
		copy(out, in)
		return c.postMatch()
	}
	if c.alg == Direct {
		return c.directAllToAll(out, counts, ro, in)
	}
	return c.matchWhileMoving(counts, func(ctx context.Context) error {
		own := make(chan struct{})
		go func() { // this rank's block, while the others travel
			copy(out[ro[c.rank]:ro[c.rank+1]], in[so[c.rank]:so[c.rank+1]])
			close(own)
		}()
		err := c.pairwise(ctx, stepAllToAll,
			func(p int) []byte { return in[so[p]:so[p+1]] },
			func(p int) []byte { return out[ro[p]:ro[p+1]] })
		<-own
		return err
	})
}

// matchWhileMoving runs the counts match and move at once, so that no
// block waits a round for the slowest rank's signature. Every rank still
// waits for the whole match before it reports: a disagreement fails every
// rank alike whatever the data did (a block of the wrong size fails its
// Recv; the matrix then names the pair), and a failed match stops the move
// (a peer running another collective would never send its blocks).
func (c *coll) matchWhileMoving(counts []byte, move func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	moved := make(chan error, 1)
	go func() { moved <- move(ctx) }()
	err := c.matchCounts(counts)
	if err != nil {
		cancel()
	}
	if merr := <-moved; err == nil {
		err = merr
	}
	return err
}

// directAllToAll: every rank copies its block of each peer's input; one
// Sync, after which the peers may reuse their inputs.
func (c *coll) directAllToAll(out, counts []byte, ro []int, in []byte) error {
	w, err := c.matchWindow(counts, in)
	if err != nil {
		return err
	}
	defer w.Leave()
	all := make([][]byte, c.n)
	for p := range all {
		all[p] = w.Buffers(p)[1]
	}
	if err := checkCounts(all); err != nil {
		return err
	}
	for p := 0; p < c.n; p++ {
		peerOff := blocks(decodeCounts(all[p], c.n, 0), c.d.DType.Size())
		copy(out[ro[p]:ro[p+1]], w.Buffers(p)[2][peerOff[c.rank]:peerOff[c.rank+1]])
	}
	return w.Sync(c.ctx)
}

// encodeCounts is a rank's row and column of the count matrix: its send
// counts, then its receive counts, as big-endian int64s.
func encodeCounts(send, recv []int) []byte {
	b := make([]byte, 16*len(send))
	for j := range send {
		binary.BigEndian.PutUint64(b[8*j:], uint64(send[j]))
		binary.BigEndian.PutUint64(b[8*(len(send)+j):], uint64(recv[j]))
	}
	return b
}

// decodeCounts is the send (half 0) or receive (half 1) counts of an
// encoded row for n ranks.
func decodeCounts(b []byte, n, half int) []int {
	out := make([]int, n)
	for j := range out {
		out[j] = int(binary.BigEndian.Uint64(b[8*(half*n+j):]))
	}
	return out
}

// checkCounts checks every rank's encoded counts (rank order) against each
// other: rank i's send count for j must equal j's receive count for i.
// Every rank checks the same matrix in the same order, so every rank
// reaches the same verdict and names the same pair.
func checkCounts(all [][]byte) error {
	n := len(all)
	for i := range n {
		if len(all[i]) != 16*n {
			return agreed("rank %d sent %d bytes of counts, want %d: %w", i, len(all[i]), 16*n, ErrMismatch)
		}
	}
	for i := range n {
		send := decodeCounts(all[i], n, 0)
		for j := range n {
			if got := decodeCounts(all[j], n, 1)[i]; send[j] != got {
				return agreed("rank %d sends %d elements to rank %d, which expects %d: %w: %w",
					i, send[j], j, got, ErrShapeMismatch, ErrMismatch)
			}
		}
	}
	return nil
}

// matchCounts is the match of a collective whose ranks pass counts of
// their own: every rank gathers every rank's signature and counts (one
// message each way per pair, on the match's step, so a peer that runs
// another collective here fails at once on the size) and checks the whole
// lot the same way.
func (c *coll) matchCounts(counts []byte) error {
	mine := append(c.signature().encode(), counts...)
	all := make([][]byte, c.n)
	for p := range all {
		all[p] = make([]byte, len(mine))
	}
	all[c.rank] = mine
	err := c.pairwise(c.ctx, stepMatch, func(int) []byte { return mine }, func(p int) []byte { return all[p] })
	if err != nil {
		return err
	}
	lo, hi := all[0][:sigLen], all[0][:sigLen]
	for _, b := range all {
		if bytes.Compare(b[:sigLen], lo) < 0 {
			lo = b[:sigLen]
		}
		if bytes.Compare(b[:sigLen], hi) > 0 {
			hi = b[:sigLen]
		}
	}
	if !bytes.Equal(lo, hi) {
		return mismatch(lo, hi)
	}
	rows := make([][]byte, c.n)
	for p, b := range all {
		rows[p] = b[sigLen:]
	}
	if err := checkCounts(rows); err != nil {
		return err
	}
	return c.postMatch()
}
