package algo

// Fuzz targets for what travels between ranks and is decoded there: the
// match signature (encode/decode, the mismatch verdict every rank reaches
// from the min and max it received, and which descriptor fields it tells
// apart), and the block split (the tag layout's own target is
// transport.FuzzTags). Internal,
// because the signature is. Run one with:
//
//	go test -run='^$' -fuzz='^FuzzSignatureOf$' -fuzztime=30s ./collectives/algo

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/gpu"
)

// FuzzSignature: decode(encode(s)) == s for every signature, at the full
// width of every field, in sigLen bytes; and decoding any sigLen bytes
// gives a signature that encodes to bytes decoding to the same again.
func FuzzSignature(f *testing.F) {
	f.Add(uint8(KindBroadcast), uint8(gpu.Float32), uint8(0), uint8(Ring<<1), int64(1<<32), int64(7), int64(128<<10), int64(0), []byte{})
	f.Add(uint8(KindAllReduce), uint8(gpu.BFloat16), uint8(reduce.Sum), uint8(Direct<<1|1), int64(0), int64(math.MaxInt64), int64(0), int64(-1), []byte{0xff})
	f.Add(uint8(255), uint8(255), uint8(255), uint8(255), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64),
		bytes.Repeat([]byte{0xa5}, sigLen))
	f.Fuzz(func(t *testing.T, kind, dtype, op, alg uint8, root, count, chunk, whole int64, raw []byte) {
		s := signature{kind: Kind(kind), dtype: gpu.DType(dtype), op: reduce.Op(op), alg: alg,
			root: root, count: count, chunk: chunk, whole: whole}
		b := s.encode()
		if len(b) != sigLen {
			t.Fatalf("%v encodes to %d bytes, want %d", s, len(b), sigLen)
		}
		if got := decodeSig(b); got != s {
			t.Fatalf("decode(encode(%v)) = %v", s, got)
		}
		_ = s.String()
		// Any bytes a peer could send.
		in := make([]byte, sigLen)
		copy(in, raw)
		d := decodeSig(in)
		_ = d.String()
		if again := decodeSig(d.encode()); again != d {
			t.Fatalf("%x decodes to %v, which encodes to %x, which decodes to %v", in, d, d.encode(), again)
		}
	})
}

// FuzzMismatch: for any two different signatures (as the min and max of
// a match), every rank's verdict wraps ErrMismatch, is an agreed error
// (no abort needed: every rank reaches it alone), and wraps
// ErrShapeMismatch exactly when the kinds agree and the payloads
// (count, whole, dtype) do not.
func FuzzMismatch(f *testing.F) {
	a := signature{kind: KindAllReduce, dtype: gpu.Float32, op: reduce.Sum, count: 4}
	b := a
	b.count = 5
	f.Add(a.encode(), b.encode())
	b = a
	b.op = reduce.Max
	f.Add(a.encode(), b.encode())
	b = a
	b.kind = KindAllGather
	f.Add(a.encode(), b.encode())
	b = signature{kind: KindBroadcast, root: 1 << 32}
	f.Add(signature{kind: KindBroadcast}.encode(), b.encode())
	f.Add([]byte{1}, []byte{1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, x, y []byte) {
		lo, hi := make([]byte, sigLen), make([]byte, sigLen)
		copy(lo, x)
		copy(hi, y)
		if bytes.Compare(lo, hi) > 0 {
			lo, hi = hi, lo
		}
		if bytes.Equal(lo, hi) {
			return
		}
		err := mismatch(lo, hi)
		if !errors.Is(err, ErrMismatch) {
			t.Fatalf("mismatch(%x, %x) = %v, want ErrMismatch", lo, hi, err)
		}
		var ag agreedError
		if !errors.As(err, &ag) {
			t.Fatalf("mismatch(%x, %x) = %v, not an agreed error", lo, hi, err)
		}
		p, q := decodeSig(lo), decodeSig(hi)
		shape := p.kind == q.kind && (p.count != q.count || p.whole != q.whole || p.dtype != q.dtype)
		if errors.Is(err, ErrShapeMismatch) != shape {
			t.Fatalf("mismatch(%v, %v) = %v: shape mismatch %v, want %v", p, q, err, !shape, shape)
		}
	})
}

// FuzzSignatureOf: the signature of a call tells two descriptors apart
// exactly when they differ in a field their kind uses (at full width: a
// root or count beyond 32 bits included), or in the resolved algorithm
// and its chunking; fields a kind ignores never cause a mismatch.
func FuzzSignatureOf(f *testing.F) {
	f.Add(uint8(KindBroadcast), uint8(gpu.Float32), uint8(0), int64(4), int64(0), int64(0), uint8(Ring), false, int64(1<<17),
		uint8(gpu.Float32), uint8(0), int64(4), int64(1<<32), int64(0), uint8(Ring), false, int64(1<<17))
	f.Add(uint8(KindAllReduce), uint8(gpu.Int8), uint8(reduce.Sum), int64(1<<32), int64(0), int64(0), uint8(Direct), true, int64(0),
		uint8(gpu.Int8), uint8(reduce.Sum), int64(0), int64(0), int64(0), uint8(Direct), true, int64(0))
	f.Add(uint8(KindAllGather), uint8(gpu.Int8), uint8(reduce.Sum), int64(9), int64(5), int64(0), uint8(Ring), false, int64(4096),
		uint8(gpu.Int8), uint8(reduce.Max), int64(9), int64(-5), int64(0), uint8(Ring), false, int64(4096)) // ignored op and root
	f.Add(uint8(KindBarrier), uint8(gpu.Int8), uint8(0), int64(9), int64(0), int64(0), uint8(Ring), false, int64(1),
		uint8(gpu.Float64), uint8(0), int64(-9), int64(0), int64(0), uint8(Ring), false, int64(1))
	f.Add(uint8(KindAllReduce), uint8(gpu.Float16), uint8(reduce.Sum), int64(1<<24), int64(0), int64(1<<26), uint8(Ring), false, int64(128<<10),
		uint8(gpu.Float16), uint8(reduce.Sum), int64(1<<24), int64(0), int64(1<<25), uint8(Ring), false, int64(128<<10)) // parts of different wholes
	f.Add(uint8(KindReduce), uint8(gpu.Float32), uint8(reduce.Max), int64(4), int64(1), int64(0), uint8(Ring), true, int64(0),
		uint8(gpu.Float32), uint8(reduce.Max), int64(4), int64(2), int64(0), uint8(Ring), true, int64(0)) // roots differ
	f.Add(uint8(KindAllToAll), uint8(gpu.Int32), uint8(0), int64(4), int64(0), int64(0), uint8(Direct), false, int64(0),
		uint8(gpu.Int32), uint8(0), int64(8), int64(0), int64(0), uint8(Direct), false, int64(0)) // totals may differ
	f.Fuzz(func(t *testing.T, kind, dt1, op1 uint8, count1, root1, whole1 int64, alg1 uint8, small1 bool, chunk1 int64,
		dt2, op2 uint8, count2, root2, whole2 int64, alg2 uint8, small2 bool, chunk2 int64) {
		mk := func(dt, op uint8, count, root, whole int64, alg uint8, small bool, chunk int64) *coll {
			return &coll{d: Desc{Kind: Kind(kind), DType: gpu.DType(dt), Op: reduce.Op(op), Count: int(count), Root: int(root), Whole: int(whole)},
				alg: Algorithm(alg % 4), small: small, o: Options{ChunkBytes: int(chunk)}}
		}
		c1 := mk(dt1, op1, count1, root1, whole1, alg1, small1, chunk1)
		c2 := mk(dt2, op2, count2, root2, whole2, alg2, small2, chunk2)
		// The model: the fields each kind uses.
		type used struct {
			dtype              gpu.DType
			count, root, chunk int
			whole              int
			op                 reduce.Op
			alg                Algorithm
			small              bool
		}
		model := func(c *coll) used {
			u := used{dtype: c.d.DType, count: c.d.Count, whole: c.d.Whole, alg: c.alg, small: c.small}
			switch c.d.Kind {
			case KindAllReduce, KindReduceScatter, KindReduce:
				u.op = c.d.Op
			}
			switch c.d.Kind {
			case KindBroadcast, KindGather, KindScatter, KindReduce:
				u.root = c.d.Root
			}
			if c.d.Kind == KindAllToAll {
				u.count = 0 // matched pairwise, with the counts
			}
			if c.alg == Ring || c.d.Kind == KindBroadcast && c.alg != Direct {
				u.chunk = c.o.ChunkBytes
			}
			if c.d.Kind == KindBarrier {
				u.dtype, u.count = 0, 0
			}
			return u
		}
		s1, s2 := c1.signature().encode(), c2.signature().encode()
		if same := model(c1) == model(c2); same != bytes.Equal(s1, s2) {
			t.Fatalf("%s: descriptors %+v (alg %v small %v chunk %d) and %+v (alg %v small %v chunk %d): equal signatures %v, want %v",
				Kind(kind), c1.d, c1.alg, c1.small, c1.o.ChunkBytes, c2.d, c2.alg, c2.small, c2.o.ChunkBytes, !same, same)
		}
	})
}

// FuzzBlockRange: the blocks of count elements over n ranks tile
// [0, count) in order, differ in length by at most one, the longer first.
func FuzzBlockRange(f *testing.F) {
	f.Add(int64(10), uint16(3))
	f.Add(int64(2), uint16(4))
	f.Add(int64(0), uint16(1))
	f.Add(int64(math.MaxInt64), uint16(7))
	f.Fuzz(func(t *testing.T, count int64, n16 uint16) {
		if count < 0 {
			count = -(count + 1)
		}
		n := int(n16)%1024 + 1
		next, first := 0, -1
		for b := range n {
			lo, hi := BlockRange(int(count), n, b)
			if lo != next || hi < lo {
				t.Fatalf("BlockRange(%d, %d, %d) = [%d, %d), want it to start at %d", count, n, b, lo, hi, next)
			}
			if first < 0 {
				first = hi - lo
			}
			if l := hi - lo; l != first && l != first-1 {
				t.Fatalf("BlockRange(%d, %d, %d) has %d elements, block 0 %d", count, n, b, l, first)
			}
			if b > 0 {
				plo, phi := BlockRange(int(count), n, b-1)
				if phi-plo < hi-lo {
					t.Fatalf("BlockRange(%d, %d): block %d shorter than block %d", count, n, b-1, b)
				}
			}
			next = hi
		}
		if next != int(count) {
			t.Fatalf("BlockRange(%d, %d): the blocks end at %d", count, n, next)
		}
	})
}
