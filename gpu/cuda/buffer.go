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
// reaches through Bytes and the GPU through its unified address. Both are
// zero-filled by Alloc. dptr is the address GPU commands use (0 for an
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

// alloc makes a zero-filled buffer; it runs on the device's main thread.
func (d *Device) alloc(n int, kind gpu.MemKind) (*buffer, error) {
	b := &buffer{dev: d, n: n, kind: kind}
	a := d.api
	switch {
	case n == 0:
		if kind == gpu.HostMem {
			b.bytes = []byte{}
		}
	case kind == gpu.DeviceMem:
		var p uintptr
		if err := a.errorf("cuMemAlloc_v2", a.cuMemAlloc(&p, uint64(n))); err != nil {
			return nil, fmt.Errorf("cuda: alloc %d bytes of device memory: %w", n, err)
		}
		err := a.errorf("cuMemsetD8Async", a.cuMemsetD8Async(p, 0, uint64(n), d.zeroStream))
		if err == nil {
			err = a.errorf("cuStreamSynchronize", a.cuStreamSynchronize(d.zeroStream))
		}
		if err != nil {
			a.cuMemFree(p)
			return nil, fmt.Errorf("cuda: zero %d bytes of device memory: %w", n, err)
		}
		b.dptr = p
	default:
		var h unsafe.Pointer
		if err := a.errorf("cuMemHostAlloc", a.cuMemHostAlloc(&h, uint64(n), memHostAllocPortable|memHostAllocDeviceMap)); err != nil {
			return nil, fmt.Errorf("cuda: alloc %d bytes of pinned host memory: %w", n, err)
		}
		var p uintptr
		if err := a.errorf("cuMemHostGetDevicePointer_v2", a.cuMemHostGetDevicePointer(&p, h, 0)); err != nil {
			a.cuMemFreeHost(h)
			return nil, fmt.Errorf("cuda: map %d bytes of pinned host memory: %w", n, err)
		}
		b.host, b.dptr = h, p
		b.bytes = unsafe.Slice((*byte)(h), n)
		clear(b.bytes)
	}
	b.l.release = func() { d.releaseBuffer(b) }
	return b, nil
}

// releaseBuffer hands b's memory to the reaper thread (cuMemFree
// synchronizes with the context and must not stall any caller). A buffer
// that Device.Close already took over is left to it.
func (d *Device) releaseBuffer(b *buffer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.live[b]; !ok {
		return
	}
	delete(d.live, b)
	d.queueFree(b.freeFunc())
}

// freeFunc returns the driver call that gives b's memory back; it runs on
// a driver thread.
func (b *buffer) freeFunc() func() {
	a, n, kind, dptr, host := b.dev.api, b.n, b.kind, b.dptr, b.host
	return func() {
		switch {
		case n == 0:
		case kind == gpu.DeviceMem:
			a.cuMemFree(dptr)
		default:
			a.cuMemFreeHost(host)
		}
	}
}
