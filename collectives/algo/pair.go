package algo

import (
	"bytes"
	"errors"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
)

// stepRecheck is the match's last step: two ranks whose first match
// messages differed in size (one sent its data with its signature, see
// pairAllReduce) exchange their signatures alone there.
const stepRecheck = stepMatch + 63

// pairAllReduce is the small all-reduce of two ranks over messages, in one
// round trip instead of two: each rank sends the match message (its
// signature, twice, as matchMessages' first round does) with its whole
// input behind it, checks the peer's signature as the match would, and
// reduces. Both ranks compute lower op upper (rank 0's input first), so
// their bits agree. A peer that sent a message of another size (another
// shape, or a collective that sends the match alone) is met at
// stepRecheck, where both learn the precise mismatch.
func (c *coll) pairAllReduce(in, out []byte) error {
	sig := c.signature().encode()
	const hdr = 2 * sigLen
	msg := getScratch(hdr + len(in))
	defer putScratch(msg)
	copy(msg, sig)
	copy(msg[sigLen:], sig)
	copy(msg[hdr:], in)
	got := getScratch(hdr + len(in))
	defer putScratch(got)
	peer := 1 - c.rank
	if err := c.exchange(c.ctx, stepMatch, peer, msg, peer, got); err != nil {
		if errors.Is(err, transport.ErrSizeMismatch) {
			return c.recheck(sig)
		}
		return err
	}
	fold(msg[:hdr], got[:hdr])
	if err := checkFolded(msg[:hdr]); err != nil {
		return err
	}
	if err := c.postMatch(); err != nil {
		return err
	}
	theirs := got[hdr:]
	if c.rank == 0 {
		return reduce.Many(c.d.Op, c.d.DType, out, in, theirs)
	}
	if reduce.Overlap(out, in) == reduce.Identical {
		if err := reduce.Many(c.d.Op, c.d.DType, theirs, theirs, in); err != nil {
			return err
		}
		copy(out, theirs)
		return nil
	}
	return reduce.Many(c.d.Op, c.d.DType, out, theirs, in)
}

// recheck is the match of two ranks whose match messages differed in
// size: they exchange their signatures alone, which differ.
func (c *coll) recheck(sig []byte) error {
	peer := 1 - c.rank
	got := make([]byte, sigLen)
	if err := c.exchange(c.ctx, stepRecheck, peer, sig, peer, got); err != nil {
		return err
	}
	lo, hi := sig, got
	if bytes.Compare(lo, hi) > 0 {
		lo, hi = hi, lo
	}
	if bytes.Equal(lo, hi) {
		return agreed("ranks sent match messages of different sizes with equal signatures %v: %w", decodeSig(sig), ErrMismatch)
	}
	return mismatch(lo, hi)
}
