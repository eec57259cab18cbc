//go:build linux

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/pool"
)

// buffer is a gpu.Buffer. DeviceMem lives in device memory (cuMemAlloc_v2)
// and has no CPU view; HostMem lives in pinned, portable, device-mapped
// host memory (cuMemHostAlloc with PORTABLE|DEVICEMAP), which the CPU
// reaches through Bytes and the GPU through its unified address. HostMem
// is zero-filled by Alloc; DeviceMem contents are undefined. dptr is the
// address GPU commands use (0 for an empty buffer). Free is idempotent and
// deferred by the lease until no queued command names the buffer; the
// block then goes back to the device's cache, so Free never blocks on the
// GPU.
type buffer struct {
	dev   *Device
	n     int
	kind  gpu.MemKind
	dptr  uintptr
	host  unsafe.Pointer // HostMem only
	bytes []byte         // HostMem only; nil once freed
	l     lease
}

var _ gpu.Buffer = (*buffer)(nil)

func (b *buffer) lease() *lease { return &b.l }

// Len implements gpu.Buffer.
func (b *buffer) Len() int { return b.n }

// Kind implements gpu.Buffer.
func (b *buffer) Kind() gpu.MemKind { return b.kind }

// Bytes implements gpu.Buffer: the pinned host memory of a HostMem buffer,
// nil for DeviceMem and for a freed buffer.
func (b *buffer) Bytes() []byte {
	if b.kind != gpu.HostMem || b.l.isFreed() {
		return nil
	}
	return b.bytes
}

// Free implements gpu.Buffer.
func (b *buffer) Free() error {
	b.l.free()
	return nil
}

// Memory goes back to the driver only at Device.Close and is never cleared
// on the GPU (the package doc, Memory, says why: either could wait behind a
// blocked fence wait). Freed blocks of either kind are cached by size
// class (pool.Lists, unbounded: nothing else may take them back before
// Close) and reused by later allocations of the class; blocks of classes
// up to carveMax are carved out of slabs (slab.go).

// sizeClass is the size class of an n-byte block of either kind: a power
// of two, 4 KiB at least.
func sizeClass(n int) int { return max(pool.Class(n), 4096) }

// hostBlock is one cached pinned host allocation.
type hostBlock struct {
	host unsafe.Pointer
	dptr uintptr
}

// allocCached makes a buffer from a cached block (or of size 0) without any
// driver call, on the calling goroutine; nil if there is no such block.
func (d *Device) allocCached(n int, kind gpu.MemKind) *buffer {
	var blk hostBlock
	switch {
	case n == 0:
	case kind == gpu.DeviceMem:
		p, ok := d.takeDeviceBlock(sizeClass(n))
		if !ok {
			return nil
		}
		blk.dptr = p
	default:
		var ok bool
		if blk, ok = d.takeHostBlock(sizeClass(n)); !ok {
			return nil
		}
	}
	return d.newBuffer(n, kind, blk)
}

// alloc makes a buffer (HostMem zero-filled) from a cached block, a slab
// or the driver; it runs on the device's main thread.
func (d *Device) alloc(n int, kind gpu.MemKind) (*buffer, error) {
	if b := d.allocCached(n, kind); b != nil {
		return b, nil
	}
	a := d.api
	class := sizeClass(n)
	var blk hostBlock
	switch {
	case kind == gpu.DeviceMem && carved(n):
		p, err := d.carveDevice(class)
		if err != nil {
			return nil, fmt.Errorf("cuda: alloc %d bytes of device memory: %w", n, err)
		}
		blk.dptr = p
	case kind == gpu.DeviceMem:
		if err := a.errorf("cuMemAlloc_v2", a.cuMemAlloc(&blk.dptr, uint64(class))); err != nil {
			return nil, fmt.Errorf("cuda: alloc %d bytes of device memory: %w", n, err)
		}
	case carved(n):
		var err error
		if blk, err = d.carveHost(class); err != nil {
			return nil, fmt.Errorf("cuda: alloc %d bytes of pinned host memory: %w", n, err)
		}
	default:
		if err := a.errorf("cuMemHostAlloc", a.cuMemHostAlloc(&blk.host, uint64(class), memHostAllocPortable|memHostAllocDeviceMap)); err != nil {
			return nil, fmt.Errorf("cuda: alloc %d bytes of pinned host memory: %w", n, err)
		}
		if err := a.errorf("cuMemHostGetDevicePointer_v2", a.cuMemHostGetDevicePointer(&blk.dptr, blk.host, 0)); err != nil {
			a.cuMemFreeHost(blk.host)
			return nil, fmt.Errorf("cuda: map %d bytes of pinned host memory: %w", n, err)
		}
	}
	return d.newBuffer(n, kind, blk), nil
}

// newBuffer makes an n-byte buffer on blk (only its dptr for DeviceMem,
// nothing for n == 0); HostMem is cleared.
func (d *Device) newBuffer(n int, kind gpu.MemKind, blk hostBlock) *buffer {
	b := &buffer{dev: d, n: n, kind: kind, dptr: blk.dptr}
	if kind == gpu.HostMem {
		b.bytes = []byte{}
		if n > 0 {
			b.host = blk.host
			b.bytes = unsafe.Slice((*byte)(blk.host), n)
			clear(b.bytes)
		}
	}
	b.l.release = func() { d.releaseBuffer(b) }
	return b
}

// freeDevice gives device memory back; it runs on a driver thread and only
// at Device.Close, when no stream is blocked any more (cuMemFree waits for
// the context).
func (d *Device) freeDevice(p uintptr) { d.api.cuMemFree(p) }

// takeDeviceBlock takes a cached device block of the size class.
func (d *Device) takeDeviceBlock(class int) (uintptr, bool) { return takeBlock(d, &d.devCache, class) }

// takeHostBlock takes a cached pinned host block of the size class.
func (d *Device) takeHostBlock(class int) (hostBlock, bool) { return takeBlock(d, &d.hostCache, class) }

func takeBlock[T any](d *Device, cache *pool.Lists[int, T], class int) (T, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return cache.Take(class)
}

// releaseBuffer gives b's memory back once no command names it: into the
// device or host block cache. A buffer that Device.Close already took over
// is left to it.
func (d *Device) releaseBuffer(b *buffer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.live[b]; !ok {
		return
	}
	delete(d.live, b)
	switch {
	case b.n == 0:
	case b.kind == gpu.HostMem:
		c := sizeClass(b.n)
		d.hostCache.Put(c, hostBlock{host: b.host, dptr: b.dptr}, c)
	default:
		c := sizeClass(b.n)
		d.devCache.Put(c, b.dptr, c)
	}
}

// freeFunc returns the driver call that gives b's memory back for good
// (Device.Close); it runs on a driver thread.
func (b *buffer) freeFunc() func() {
	d, n, kind, dptr, host := b.dev, b.n, b.kind, b.dptr, b.host
	return func() {
		switch {
		case n == 0 || carved(n): // nothing, or its slab's
		case kind == gpu.DeviceMem:
			d.freeDevice(dptr)
		default:
			d.api.cuMemFreeHost(host)
		}
	}
}
