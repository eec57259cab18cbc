//go:build linux

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/choreo-gpu/choreo/gpu"
)

// buffer is a gpu.Buffer. DeviceMem lives in device memory (cuMemAlloc_v2)
// and has no CPU view; HostMem lives in pinned, portable, device-mapped
// host memory (cuMemHostAlloc with PORTABLE|DEVICEMAP), which the CPU
// reaches through Bytes and the GPU through its unified address. HostMem
// is zero-filled by Alloc; DeviceMem contents are undefined. dptr is the address GPU commands use (0 for an
// empty buffer). Free is idempotent and deferred by the lease until no
// queued command names the buffer; the memory then goes back on the
// device's reaper thread, so Free never blocks on the GPU.
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

// Memory and the driver's implicit synchronization: cuMemFree (and
// cuMemFreeHost) wait for the whole context, and while one waits every
// other allocation blocks too (measured on the H200: a stream blocked on a
// fence wait stalled the next Alloc after a Free until the fence was
// released). Frees therefore never synchronize:
//   - device memory blocks (cuMemAlloc_v2, rounded up to a power-of-two
//     size class) are cached once no queued command names them and reused
//     by later allocations of the class; they are not cleared (the gpu
//     contract leaves DeviceMem contents undefined), because clearing
//     needs GPU work, and GPU work can sit behind a blocked fence wait
//     (streams share the device's hardware queues): on the H200 a 3x3-rank
//     test deadlocked in the memset of an allocation. They go back to the
//     driver at Device.Close.
//   - pinned host blocks are cached by power-of-two size class and reused
//     by later HostMem allocations; they go back to the driver only at
//     Device.Close, when no stream is blocked any more.
//   - blocks of classes up to carveMax, of either kind, are carved out of
//     slabs (slab.go), so that small allocations almost never reach the
//     driver.

// hostClass is the size class of an n-byte pinned host block.
func hostClass(n int) int {
	c := 4096
	for c < n {
		c *= 2
	}
	return c
}

// hostBlock is one cached pinned host allocation.
type hostBlock struct {
	host unsafe.Pointer
	dptr uintptr
}

// allocCached makes a buffer from a cached block (or of size 0) without any
// driver call, on the calling goroutine; nil if there is no such block.
func (d *Device) allocCached(n int, kind gpu.MemKind) *buffer {
	b := &buffer{dev: d, n: n, kind: kind}
	switch {
	case n == 0:
		if kind == gpu.HostMem {
			b.bytes = []byte{}
		}
	case kind == gpu.DeviceMem:
		p, ok := d.takeDeviceBlock(hostClass(n))
		if !ok {
			return nil
		}
		b.dptr = p
	default:
		blk, ok := d.takeHostBlock(hostClass(n))
		if !ok {
			return nil
		}
		b.host, b.dptr = blk.host, blk.dptr
		b.bytes = unsafe.Slice((*byte)(blk.host), n)
		clear(b.bytes)
	}
	b.l.release = func() { d.releaseBuffer(b) }
	return b
}

// alloc makes a buffer (HostMem zero-filled); it runs on the device's main
// thread.
func (d *Device) alloc(n int, kind gpu.MemKind) (*buffer, error) {
	b := &buffer{dev: d, n: n, kind: kind}
	a := d.api
	switch {
	case n == 0:
		if kind == gpu.HostMem {
			b.bytes = []byte{}
		}
	case kind == gpu.DeviceMem:
		// Device memory is cached by size class and never cleared here: an
		// allocation must not wait for GPU work, which may sit behind a
		// fence wait that only this allocation's caller can release.
		class := hostClass(n)
		p, ok := d.takeDeviceBlock(class)
		switch {
		case ok:
		case carved(n):
			var err error
			if p, err = d.carveDevice(class); err != nil {
				return nil, fmt.Errorf("cuda: alloc %d bytes of device memory: %w", n, err)
			}
		default:
			if err := a.errorf("cuMemAlloc_v2", a.cuMemAlloc(&p, uint64(class))); err != nil {
				return nil, fmt.Errorf("cuda: alloc %d bytes of device memory: %w", n, err)
			}
		}
		b.dptr = p
	default:
		class := hostClass(n)
		blk, ok := d.takeHostBlock(class)
		switch {
		case ok:
		case carved(n):
			var err error
			if blk, err = d.carveHost(class); err != nil {
				return nil, fmt.Errorf("cuda: alloc %d bytes of pinned host memory: %w", n, err)
			}
		default:
			var h unsafe.Pointer
			if err := a.errorf("cuMemHostAlloc", a.cuMemHostAlloc(&h, uint64(class), memHostAllocPortable|memHostAllocDeviceMap)); err != nil {
				return nil, fmt.Errorf("cuda: alloc %d bytes of pinned host memory: %w", n, err)
			}
			var p uintptr
			if err := a.errorf("cuMemHostGetDevicePointer_v2", a.cuMemHostGetDevicePointer(&p, h, 0)); err != nil {
				a.cuMemFreeHost(h)
				return nil, fmt.Errorf("cuda: map %d bytes of pinned host memory: %w", n, err)
			}
			blk = hostBlock{host: h, dptr: p}
		}
		b.host, b.dptr = blk.host, blk.dptr
		b.bytes = unsafe.Slice((*byte)(blk.host), n)
		clear(b.bytes)
	}
	b.l.release = func() { d.releaseBuffer(b) }
	return b, nil
}

// freeDevice gives device memory back; it runs on a driver thread and only
// at Device.Close, when no stream is blocked any more (cuMemFree waits for
// the context).
func (d *Device) freeDevice(p uintptr) { d.api.cuMemFree(p) }

// takeDeviceBlock takes a cached device block of the size class.
func (d *Device) takeDeviceBlock(class int) (uintptr, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	list := d.devCache[class]
	if len(list) == 0 {
		return 0, false
	}
	p := list[len(list)-1]
	d.devCache[class] = list[:len(list)-1]
	return p, true
}

func (d *Device) takeHostBlock(class int) (hostBlock, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	list := d.hostCache[class]
	if len(list) == 0 {
		return hostBlock{}, false
	}
	blk := list[len(list)-1]
	d.hostCache[class] = list[:len(list)-1]
	return blk, true
}

// releaseBuffer gives b's memory back once no command names it: into the
// device or host block cache. A buffer that Device.Close already took over is left to it.
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
		c := hostClass(b.n)
		d.hostCache[c] = append(d.hostCache[c], hostBlock{host: b.host, dptr: b.dptr})
	default:
		c := hostClass(b.n)
		d.devCache[c] = append(d.devCache[c], b.dptr)
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
