//go:build linux

package cuda

import (
	"fmt"
	"unsafe"
)

// Small blocks are carved out of slabs. A cache miss costs a hop to the
// main thread and a driver allocation, and small blocks miss often (an
// operation's output is freed only when the garbage collector finds it).
// Blocks of a size class up to carveMax are therefore cut from a
// carveSlab-byte allocation all at once: one miss fills the class's cache
// with carveSlab/class blocks. Carved blocks are cached and reused like any
// other and never given back on their own; their slabs go back to the
// driver at Device.Close.
const (
	carveMax  = 256 << 10
	carveSlab = 4 << 20
)

// carved reports whether blocks of n bytes come from slabs.
func carved(n int) bool { return n > 0 && sizeClass(n) <= carveMax }

// carveDevice allocates a device slab for class, keeps all but its first
// block in the cache and returns that one. It runs on the main thread.
func (d *Device) carveDevice(class int) (uintptr, error) {
	a := d.api
	var p uintptr
	if err := a.errorf("cuMemAlloc_v2", a.cuMemAlloc(&p, carveSlab)); err != nil {
		return 0, fmt.Errorf("cuda: device slab for %d-byte blocks: %w", class, err)
	}
	d.mu.Lock()
	if d.closed { // Close's teardown already gave the slabs back
		d.mu.Unlock()
		a.cuMemFree(p)
		return 0, closedf("alloc: device closed")
	}
	d.devSlabs = append(d.devSlabs, p)
	for off := class; off+class <= carveSlab; off += class {
		d.devCache.Put(class, p+uintptr(off), class)
	}
	d.mu.Unlock()
	return p, nil
}

// carveHost is carveDevice for pinned, device-mapped host memory.
func (d *Device) carveHost(class int) (hostBlock, error) {
	a := d.api
	var h unsafe.Pointer
	if err := a.errorf("cuMemHostAlloc", a.cuMemHostAlloc(&h, carveSlab, memHostAllocPortable|memHostAllocDeviceMap)); err != nil {
		return hostBlock{}, fmt.Errorf("cuda: pinned slab for %d-byte blocks: %w", class, err)
	}
	var p uintptr
	if err := a.errorf("cuMemHostGetDevicePointer_v2", a.cuMemHostGetDevicePointer(&p, h, 0)); err != nil {
		a.cuMemFreeHost(h)
		return hostBlock{}, fmt.Errorf("cuda: map pinned slab for %d-byte blocks: %w", class, err)
	}
	d.mu.Lock()
	if d.closed { // Close's teardown already gave the slabs back
		d.mu.Unlock()
		a.cuMemFreeHost(h)
		return hostBlock{}, closedf("alloc: device closed")
	}
	d.hostSlabs = append(d.hostSlabs, h)
	for off := class; off+class <= carveSlab; off += class {
		d.hostCache.Put(class, hostBlock{host: unsafe.Add(h, off), dptr: p + uintptr(off)}, class)
	}
	d.mu.Unlock()
	return hostBlock{host: h, dptr: p}, nil
}
