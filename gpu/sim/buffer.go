package sim

import (
	"sync/atomic"
	"unsafe"

	"github.com/choreo-gpu/choreo/gpu"
)

// align is the alignment of every buffer's first byte: a cache line, so
// kernels may view any buffer as a slice of any element type.
const align = 64

// buffer is a sim gpu.Buffer: a 64-byte aligned Go byte slice that the CPU
// and the device's queues share, whatever its MemKind. Free is idempotent;
// after it Bytes returns nil and a command naming the buffer fails with
// gpu.ErrClosed. Blocks of cacheMin bytes or more go back to the device's
// cache for reuse, but only once the buffer is freed and no submitted batch
// names it any more (refs), so a kernel racing with Free (a caller bug)
// never touches memory another buffer owns; smaller ones are left to the
// Go collector. Every block's bytes count in the device's host pool until
// the block leaves the cache.
type buffer struct {
	dev      *Device
	data     []byte // len == cap == n, never changed after newBuffer
	raw      []byte // the allocation data lies in; cached for reuse
	n        int
	kind     gpu.MemKind
	freed    atomic.Bool
	refs     atomic.Int32 // submitted, unfinished batches naming the buffer
	recycled atomic.Bool
	alias    bool // an import of another buffer's memory (ipc.go): nothing to recycle
}

var _ gpu.Buffer = (*buffer)(nil)

// newBuffer makes a buffer of n bytes in raw, a cached block, or when raw
// is nil in a new block of size bytes, which Device.reserve accounted for.
func newBuffer(d *Device, n int, kind gpu.MemKind, raw []byte, size int) *buffer {
	reused := raw != nil
	if raw == nil {
		raw = make([]byte, size+align-1)
	}
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) % align); r != 0 {
		off = align - r
	}
	b := &buffer{dev: d, data: raw[off : off+n : off+n], raw: raw, n: n, kind: kind}
	switch {
	case kind == gpu.DeviceMem && d.cfg.staged:
		// Like a reused block on a real GPU: never assume zeros. Filled
		// by doubling copies, not byte by byte (a loop of stores is slow
		// under the race detector).
		if n > 0 {
			b.data[0] = 0xA5
			for i := 1; i < n; i *= 2 {
				copy(b.data[i:], b.data[:i])
			}
		}
	case reused && kind == gpu.HostMem:
		clear(b.data) // host memory starts zeroed (device memory is undefined)
	}
	return b
}

// unref ends one batch's use of the buffer; the last use of a freed
// buffer hands its block to the cache.
func (b *buffer) unref() {
	if b.refs.Add(-1) == 0 && b.freed.Load() {
		b.recycle()
	}
}

// recycle gives the block to the device's cache, once.
func (b *buffer) recycle() {
	if !b.recycled.Swap(true) && !b.alias {
		b.dev.putCached(b.raw)
	}
}

// Len implements gpu.Buffer.
func (b *buffer) Len() int { return b.n }

// Kind implements gpu.Buffer.
func (b *buffer) Kind() gpu.MemKind { return b.kind }

// Bytes implements gpu.Buffer: the shared memory for both kinds, nil once
// freed.
func (b *buffer) Bytes() []byte {
	if b.freed.Load() || (b.kind == gpu.DeviceMem && b.dev.cfg.staged) {
		return nil
	}
	return b.data
}

// Free implements gpu.Buffer.
func (b *buffer) Free() error {
	b.free()
	return nil
}

func (b *buffer) free() {
	if b.freed.Swap(true) {
		return
	}
	b.dev.forgetBuffer(b)
	if b.refs.Load() == 0 {
		b.recycle()
	}
}
