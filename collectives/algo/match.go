package algo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// sigLen is the size of an encoded signature.
const sigLen = 40

// signature is what all ranks of a collective must agree on: the
// descriptor's fields that the kind uses, at their full width, and the
// resolved algorithm with its chunking (which fix the message sizes).
// Fields a kind ignores are zeroed, so they cannot cause a mismatch.
type signature struct {
	kind  Kind
	dtype gpu.DType
	op    reduce.Op
	alg   uint8
	topo  uint32 // the Topology's Fingerprint, for Hierarchical
	root  int64
	count int64
	chunk int64
	whole int64 // Desc.Whole: the payload a part belongs to
}

func (c *coll) signature() signature {
	s := signature{kind: c.d.Kind, dtype: c.d.DType, count: int64(c.d.Count), alg: uint8(c.alg) << 1,
		whole: int64(c.d.Whole)}
	if c.small {
		s.alg |= 1
	}
	if c.d.Kind.reduces() {
		s.op = c.d.Op
	}
	if c.d.Kind.rooted() {
		s.root = int64(c.d.Root)
	}
	if c.alg == Ring || c.alg == Hierarchical || c.d.Kind == KindBroadcast && c.alg != Direct {
		s.chunk = int64(c.o.ChunkBytes)
	}
	if c.alg == Hierarchical {
		s.topo = c.o.Topology.Fingerprint()
	}
	if c.d.Kind == KindBarrier {
		s.dtype, s.count = 0, 0
	}
	if c.d.Kind == KindAllToAll {
		s.count = 0 // the counts are matched pairwise (matchCounts)
	}
	return s
}

func (s signature) encode() []byte {
	b := make([]byte, sigLen)
	b[0], b[1], b[2], b[3] = byte(s.kind), byte(s.dtype), byte(s.op), s.alg
	binary.BigEndian.PutUint32(b[4:], s.topo)
	binary.BigEndian.PutUint64(b[8:], uint64(s.root))
	binary.BigEndian.PutUint64(b[16:], uint64(s.count))
	binary.BigEndian.PutUint64(b[24:], uint64(s.chunk))
	binary.BigEndian.PutUint64(b[32:], uint64(s.whole))
	return b
}

func decodeSig(b []byte) signature {
	return signature{
		kind: Kind(b[0]), dtype: gpu.DType(b[1]), op: reduce.Op(b[2]), alg: b[3],
		topo:  binary.BigEndian.Uint32(b[4:]),
		root:  int64(binary.BigEndian.Uint64(b[8:])),
		count: int64(binary.BigEndian.Uint64(b[16:])),
		chunk: int64(binary.BigEndian.Uint64(b[24:])),
		whole: int64(binary.BigEndian.Uint64(b[32:])),
	}
}

func (s signature) String() string {
	w := ""
	if s.whole != 0 {
		w = fmt.Sprintf(" part of %d", s.whole)
	}
	if s.topo != 0 {
		w += fmt.Sprintf(" topology=%08x", s.topo)
	}
	return fmt.Sprintf("{%s %s count=%d%s op=%s root=%d alg=%s/%d chunk=%d}",
		s.kind, s.dtype, s.count, w, s.op, s.root, Algorithm(s.alg>>1), s.alg&1, s.chunk)
}

// mismatch builds the error for ranks whose signatures span [lo, hi]
// (byte order); every rank sees the same lo and hi, so the same error.
func mismatch(lo, hi []byte) error {
	a, b := decodeSig(lo), decodeSig(hi)
	if a.kind == b.kind && (a.count != b.count || a.whole != b.whole || a.dtype != b.dtype) {
		return agreed("ranks disagree: %v vs %v: %w: %w", a, b, ErrShapeMismatch, ErrMismatch)
	}
	return agreed("ranks disagree: %v vs %v: %w", a, b, ErrMismatch)
}

// matchMessages is the match over plain messages: a dissemination of the
// (min, max) signature in ceil(log2 n) rounds; afterwards every rank holds
// the global min and max, and they differ exactly when some ranks disagree.
func (c *coll) matchMessages() error { return c.matchMessagesOf(c.signature().encode()) }

// matchMessagesOf is matchMessages of the encoded signature sig.
func (c *coll) matchMessagesOf(sig []byte) error {
	cur := make([]byte, 2*sigLen)
	copy(cur, sig)
	copy(cur[sigLen:], sig)
	got := make([]byte, 2*sigLen)
	for k, dist := 0, 1; dist < c.n; k, dist = k+1, dist*2 {
		out := bytes.Clone(cur)
		if err := c.exchange(c.ctx, stepMatch+uint32(k), mod(c.rank+dist, c.n), out, mod(c.rank-dist, c.n), got); err != nil {
			if c.n == 2 && errors.Is(err, transport.ErrSizeMismatch) {
				return c.recheck(sig) // the peer sent data with its match (pairAllReduce)
			}
			return err
		}
		fold(cur, got)
	}
	return checkFolded(cur)
}

// fold folds a received match message (the lowest and the highest
// signature its sender knows) into cur, the same for this rank.
func fold(cur, got []byte) {
	if bytes.Compare(got[:sigLen], cur[:sigLen]) < 0 {
		copy(cur[:sigLen], got[:sigLen])
	}
	if bytes.Compare(got[sigLen:], cur[sigLen:]) > 0 {
		copy(cur[sigLen:], got[sigLen:])
	}
}

// checkFolded fails when the lowest and highest signature seen differ:
// the ranks disagree.
func checkFolded(cur []byte) error {
	if !bytes.Equal(cur[:sigLen], cur[sigLen:]) {
		return mismatch(cur[:sigLen], cur[sigLen:])
	}
	return nil
}

// matchWindow is the match over PeerAccess: Expose publishes the signature
// (as the window's first buffer) with bufs, and every rank compares all
// signatures. On success the caller owns the window (and must Leave it).
func (c *coll) matchWindow(bufs ...[]byte) (transport.Window, error) {
	sig := c.signature().encode()
	w, err := c.pa.Expose(c.ctx, c.tag(stepWindow), append([][]byte{sig}, bufs...)...)
	if err != nil {
		return nil, err
	}
	lo, hi := sig, sig
	for p := 0; p < c.n; p++ {
		s := w.Buffers(p)[0]
		if bytes.Compare(s, lo) < 0 {
			lo = s
		}
		if bytes.Compare(s, hi) > 0 {
			hi = s
		}
	}
	if !bytes.Equal(lo, hi) {
		w.Leave()
		return nil, mismatch(lo, hi)
	}
	if err := c.postMatch(); err != nil {
		w.Leave()
		return nil, err
	}
	return w, nil
}

// match runs the match for message-based algorithms: through a window
// (left at once) when the transport has PeerAccess, else by messages.
func (c *coll) match() error {
	if c.n == 1 {
		return c.postMatch()
	}
	if c.pa != nil {
		w, err := c.matchWindow()
		if err != nil {
			return err
		}
		w.Leave()
		return nil
	}
	if err := c.matchMessages(); err != nil {
		return err
	}
	return c.postMatch()
}

// postMatch validates what the ranks agreed on; every rank reaches the same
// verdict, so a failure needs no abort.
func (c *coll) postMatch() error {
	if c.d.Kind.reduces() && !c.d.Op.Valid() {
		return agreed("reduce op %v: %w", c.d.Op, ErrBadOp)
	}
	if c.d.Kind.rooted() && (c.d.Root < 0 || c.d.Root >= c.n) {
		return agreed("root %d out of range [0, %d): %w", c.d.Root, c.n, ErrBadArgument)
	}
	return nil
}
