package sim

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
)

// peerTable is the sim's gpu.PeerTable: buffer references that a
// PeerReduce looks up when it runs. Each entry holds a use of its buffer
// (like a batch in flight), so a buffer freed meanwhile keeps its memory
// until the table lets it go.
type peerTable struct {
	dev     *Device
	mu      sync.Mutex
	entries []*buffer
	armed   atomic.Bool
	freed   bool
	err     atomic.Pointer[error]
}

var _ gpu.PeerTable = (*peerTable)(nil)

// NewPeerTable implements gpu.PeerDevice.
func (d *Device) NewPeerTable(n int) (gpu.PeerTable, error) {
	if n <= 0 {
		return nil, fmt.Errorf("sim: peer table of %d entries: %w", n, gpu.ErrBadArgument)
	}
	return &peerTable{dev: d, entries: make([]*buffer, n)}, nil
}

func (t *peerTable) Len() int { return len(t.entries) }

func (t *peerTable) Set(i int, b gpu.Buffer) error {
	sb, ok := b.(*buffer)
	switch {
	case i < 0 || i >= len(t.entries):
		return fmt.Errorf("sim: peer table: entry %d of %d: %w", i, len(t.entries), gpu.ErrBadArgument)
	case !ok || sb.dev != t.dev:
		return fmt.Errorf("sim: peer table: entry %d: a buffer of another device: %w", i, gpu.ErrBadArgument)
	case t.armed.Load():
		return fmt.Errorf("sim: peer table: set after arm: %w", gpu.ErrBadArgument)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.freed {
		return fmt.Errorf("sim: peer table freed: %w", gpu.ErrClosed)
	}
	sb.refs.Add(1)
	if old := t.entries[i]; old != nil {
		old.unref()
	}
	t.entries[i] = sb
	return nil
}

func (t *peerTable) Arm() { t.armed.Store(true) }

func (t *peerTable) Err() error {
	if e := t.err.Load(); e != nil {
		return *e
	}
	return nil
}

func (t *peerTable) Free() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.freed {
		return nil
	}
	t.freed = true
	for i, b := range t.entries {
		if b != nil {
			b.unref()
			t.entries[i] = nil
		}
	}
	return nil
}

// fail records a run-time failure of a command reading the table.
func (t *peerTable) fail(err error) { t.err.CompareAndSwap(nil, &err) }

// peerReduce runs a PeerReduce: nothing when the table is not armed; a
// missing, freed or too short entry makes it write nothing and is kept for
// the table's Err (as a kernel that cannot fail its launch would).
func (q *queue) peerReduce(c gpu.PeerReduce) error {
	t, ok := c.Table.(*peerTable)
	if !ok || t.dev != q.dev {
		return fmt.Errorf("peer table of another device: %w", gpu.ErrBadArgument)
	}
	if !t.armed.Load() {
		return nil
	}
	es := c.DType.Size()
	span := func(i, off int) ([]byte, error) {
		t.mu.Lock()
		b := t.entries[i]
		t.mu.Unlock()
		if b == nil {
			return nil, fmt.Errorf("entry %d unset: %w", i, gpu.ErrBadArgument)
		}
		data, err := live(b, fmt.Sprintf("entry %d", i))
		if err != nil {
			return nil, err
		}
		if off > len(data)/es || c.N > len(data)/es-off {
			return nil, fmt.Errorf("entry %d: %d bytes, too few for elements [%d,+%d) of %s: %w", i, len(data), off, c.N, c.DType, gpu.ErrBadArgument)
		}
		return data[off*es : (off+c.N)*es], nil
	}
	srcs := make([][]byte, 0, c.SrcHi-c.SrcLo)
	for i := c.SrcLo; i < c.SrcHi; i++ {
		s, err := span(i, c.SrcOff)
		if err != nil {
			t.fail(err) // the command writes nothing; Err tells
			return nil
		}
		srcs = append(srcs, s)
	}
	dsts := make([][]byte, 0, c.DstHi-c.DstLo)
	for i := c.DstLo; i < c.DstHi; i++ {
		d, err := span(i, c.DstOff)
		if err != nil {
			t.fail(err) // the command writes nothing; Err tells
			return nil
		}
		dsts = append(dsts, d)
	}
	// Every source is read before any destination past the first is
	// written: a destination may be a source (in place).
	reduceMany(c.DType, c.Op, dsts[0], srcs, c.N)
	for _, d := range dsts[1:] {
		copy(d, dsts[0])
	}
	return nil
}

// reduceMany sets dst[i] = srcs[0][i] op srcs[1][i] op ... for i < n; one
// source is copied bit for bit (a NaN's payload too).
func reduceMany(dt gpu.DType, op gpu.ReduceOp, dst []byte, srcs [][]byte, n int) {
	if len(srcs) == 1 {
		copy(dst[:n*dt.Size()], srcs[0])
		return
	}
	switch dt {
	case gpu.Float32:
		reduceT(op, view[float32](dst, n), views[float32](srcs, n), fmin[float32], fmax[float32])
	case gpu.Float64:
		reduceT(op, view[float64](dst, n), views[float64](srcs, n), fmin[float64], fmax[float64])
	case gpu.Float16, gpu.BFloat16:
		reduceHalf(dt, op, dst, srcs, n)
	case gpu.Int8:
		reduceT(op, view[int8](dst, n), views[int8](srcs, n), imin[int8], imax[int8])
	case gpu.Int16:
		reduceT(op, view[int16](dst, n), views[int16](srcs, n), imin[int16], imax[int16])
	case gpu.Int32:
		reduceT(op, view[int32](dst, n), views[int32](srcs, n), imin[int32], imax[int32])
	case gpu.Int64:
		reduceT(op, view[int64](dst, n), views[int64](srcs, n), imin[int64], imax[int64])
	case gpu.Uint8:
		reduceT(op, view[uint8](dst, n), views[uint8](srcs, n), imin[uint8], imax[uint8])
	}
}

func views[T any](bs [][]byte, n int) [][]T {
	out := make([][]T, len(bs))
	for i, b := range bs {
		out[i] = view[T](b, n)
	}
	return out
}

// reduceT reduces typed sources into dst, element by element, in source
// order; dst may be one of the sources.
func reduceT[T integer | float](op gpu.ReduceOp, dst []T, srcs [][]T, lo, hi func(a, b T) T) {
	for i := range dst {
		acc := srcs[0][i]
		for _, s := range srcs[1:] {
			switch op {
			case gpu.OpSum:
				acc += s[i]
			case gpu.OpProd:
				acc *= s[i]
			case gpu.OpMin:
				acc = lo(acc, s[i])
			case gpu.OpMax:
				acc = hi(acc, s[i])
			}
		}
		dst[i] = acc
	}
}

func fmin[T float](a, b T) T {
	if a != a || b != b {
		return T(math.NaN())
	}
	return min(a, b)
}

func fmax[T float](a, b T) T {
	if a != a || b != b {
		return T(math.NaN())
	}
	return max(a, b)
}

func imin[T integer](a, b T) T { return min(a, b) }
func imax[T integer](a, b T) T { return max(a, b) }

// reduceHalf widens 16-bit floats to float32, reduces in float32 and
// rounds each result once.
func reduceHalf(dt gpu.DType, op gpu.ReduceOp, dst []byte, srcs [][]byte, n int) {
	const block = 512
	var acc, x [block]float32
	widen := half.WidenFloat16
	narrow := half.NarrowFloat16
	if dt == gpu.BFloat16 {
		widen, narrow = half.WidenBFloat16, half.NarrowBFloat16
	}
	for off := 0; off < n; off += block {
		m := min(block, n-off)
		widen(acc[:m], srcs[0][2*off:])
		for _, s := range srcs[1:] {
			widen(x[:m], s[2*off:])
			reduceT(op, acc[:m], [][]float32{acc[:m], x[:m]}, fmin[float32], fmax[float32])
		}
		narrow(dst[2*off:2*(off+m)], acc[:m])
	}
}
