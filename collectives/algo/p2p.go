package algo

import (
	"bytes"
	"context"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Point to point. The k-th Send from a to b meets the k-th Recv on b from a:
// the caller numbers them in d.Seq (per ordered pair, each side counting its
// own calls). Their messages use their own tag space (transport.P2PTag), so
// they never meet a collective's messages; ranks must be below
// transport.MaxP2PRank.
//
// The sender first sends a signature (dtype, count) and then the data; the
// receiver compares the signature with its own and, on a difference, aborts
// the pair's tag (failing the sender's pending data send, over transports
// that know) and fails with ErrShapeMismatch. A Send met by a collective, or
// by another Send, is not detected: both sides wait until their deadline.

const (
	stepP2PSig  = stepData
	stepP2PData = stepData + 1
	maxP2PRank  = transport.MaxP2PRank
)

// Send sends in (d.Count elements of d.DType) to rank d.Peer.
func Send(ctx context.Context, t transport.Transport, d Desc, in []byte, opts ...Option) error {
	c := newColl(ctx, t, d, KindSend, opts)
	return c.finish(c.p2p(in, true))
}

// Recv receives d.Count elements of d.DType from rank d.Peer into out.
func Recv(ctx context.Context, t transport.Transport, d Desc, out []byte, opts ...Option) error {
	c := newColl(ctx, t, d, KindRecv, opts)
	return c.finish(c.p2p(out, false))
}

// P2PTag is the tag (Step aside) of the seq-th message from src to dst in
// group: Abort of it fails that Send and its Recv.
func P2PTag(group uint64, src, dst int, seq uint64) transport.Tag {
	return transport.P2PTag(group, src, dst, seq)
}

func (c *coll) p2p(buf []byte, send bool) error {
	if c.n == 1 {
		return agreed("group of size 1 has no peer: %w", ErrBadPeer)
	}
	if c.d.Peer < 0 || c.d.Peer >= c.n || c.d.Peer == c.rank {
		return agreed("peer %d (group of %d, rank %d): %w", c.d.Peer, c.n, c.rank, ErrBadPeer)
	}
	if c.n > maxP2PRank {
		return agreed("group of %d ranks: point to point supports %d: %w", c.n, maxP2PRank, ErrBadArgument)
	}
	src, dst := c.rank, c.d.Peer
	if !send {
		src, dst = dst, src
	}
	c.base, c.tagged = transport.P2PTag(c.d.Group, src, dst, c.d.Seq), true
	// Local errors from here on abort the pair's tag, waking the partner.
	if !c.d.DType.Valid() || c.d.Count < 0 {
		return fmt.Errorf("invalid dtype %v or count %d: %w", c.d.DType, c.d.Count, ErrBadArgument)
	}
	if err := c.checkLen("buffer", buf, c.d.Count); err != nil {
		return err
	}
	sig := signature{kind: KindSend, dtype: c.d.DType, count: int64(c.d.Count)}.encode()
	if send {
		if err := c.t.Send(c.ctx, dst, c.tag(stepP2PSig), sig); err != nil {
			return err
		}
		return c.t.Send(c.ctx, dst, c.tag(stepP2PData), buf)
	}
	got := make([]byte, sigLen)
	if err := c.t.Recv(c.ctx, src, c.tag(stepP2PSig), got); err != nil {
		return err
	}
	if !bytes.Equal(got, sig) {
		a, b := decodeSig(got), decodeSig(sig)
		err := fmt.Errorf("sent %s x %d, receiving %s x %d: %w: %w", a.dtype, a.count, b.dtype, b.count, ErrShapeMismatch, ErrMismatch)
		c.t.Abort(c.tag(0), fmt.Errorf("recv rank %d: %w", c.rank, err))
		return agreedError{err}
	}
	return c.t.Recv(c.ctx, src, c.tag(stepP2PData), buf)
}
