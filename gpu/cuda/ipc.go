//go:build linux

package cuda

import (
	"fmt"
	"sync"

	"github.com/choreo-gpu/choreo/gpu"
)

// ipcMemHandle is CUipcMemHandle: 64 opaque bytes, passed by value to
// cuIpcOpenMemHandle (purego copies a struct over 16 bytes onto the stack,
// as the amd64 and arm64 C conventions want).
type ipcMemHandle struct{ b [64]byte }

// cuIpcMemLazyEnablePeerAccess is CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: a
// handle of another device's memory is mapped with peer access enabled.
const cuIpcMemLazyEnablePeerAccess = 0x1

// ipcCache remembers the device's exports (a buffer address's allocation
// and handle) and its imports (mappings, by handle): a handle is asked of
// the driver once per buffer address, an allocation is mapped once per
// importing device, and neither costs a hop to the driver's thread again,
// whatever number of collectives use them. Device memory goes back to the driver only at
// Close (buffer.go), so a mapping stays valid as long as the exporting
// device is open; the imports are closed at this device's Close.
type ipcCache struct {
	mu      sync.Mutex
	exports map[uintptr]exported // by a buffer's address: its allocation
	imports map[ipcMemHandle]uintptr
	closed  bool
}

var _ gpu.IPCDevice = (*Device)(nil)

// ID implements gpu.IPCDevice: the device's UUID.
func (d *Device) ID() [16]byte { return d.uuid }

// Export implements gpu.IPCDevice.
func (d *Device) Export(b gpu.Buffer) (gpu.IPCHandle, error) {
	var h gpu.IPCHandle
	cb, ok := b.(*buffer)
	switch {
	case !ok || cb.dev != d:
		return h, badArgf("ipc export: a buffer of another device")
	case cb.kind != gpu.DeviceMem:
		return h, badArgf("ipc export: %s memory cannot be shared with other processes (device memory can)", cb.kind)
	case cb.l.isFreed():
		return h, closedf("ipc export: buffer freed")
	case cb.n == 0:
		return h, nil // nothing to map: Import gives an empty buffer
	}
	// A buffer's address always lies in the same allocation (device
	// memory goes back to the driver only at Close), so the cache answers
	// without a hop to the driver's thread.
	d.ipc.mu.Lock()
	r, ok := d.ipc.exports[cb.dptr]
	d.ipc.mu.Unlock()
	var err error
	if !ok {
		r, err = call(d.main, func() (exported, error) {
			var r exported
			a := d.api
			var size uint64
			if err := a.errorf("cuMemGetAddressRange_v2", a.cuMemGetAddressRange(&r.base, &size, cb.dptr)); err != nil {
				return r, err
			}
			if err := a.errorf("cuIpcGetMemHandle", a.cuIpcGetMemHandle(&r.mh, r.base)); err != nil {
				return r, err
			}
			return r, nil
		})
	}
	if err == nil && !ok {
		d.ipc.mu.Lock()
		if d.ipc.exports == nil {
			d.ipc.exports = map[uintptr]exported{}
		}
		d.ipc.exports[cb.dptr] = r
		d.ipc.mu.Unlock()
	}
	if err != nil {
		return h, fmt.Errorf("cuda: ipc export: %w", err)
	}
	h.Mem = r.mh.b
	h.Offset = uint64(cb.dptr - r.base)
	h.Len = uint64(cb.n)
	return h, nil
}

// Import implements gpu.IPCDevice.
func (d *Device) Import(h gpu.IPCHandle) (gpu.Buffer, error) {
	if d.isClosed() {
		return nil, closedf("ipc import: device closed")
	}
	b := &buffer{dev: d, n: int(h.Len), kind: gpu.DeviceMem}
	b.l.release = func() {} // an alias: the memory is the exporter's
	if h.Len == 0 {
		return b, nil
	}
	mh := ipcMemHandle{h.Mem}
	d.ipc.mu.Lock()
	base, ok := d.ipc.imports[mh]
	closed := d.ipc.closed
	d.ipc.mu.Unlock()
	var err error
	switch {
	case closed:
		return nil, closedf("ipc import: device closed")
	case !ok:
		base, err = call(d.main, func() (uintptr, error) {
			d.ipc.mu.Lock()
			p, ok := d.ipc.imports[mh] // another import may have mapped it meanwhile
			d.ipc.mu.Unlock()
			if ok {
				return p, nil
			}
			a := d.api
			if err := a.errorf("cuIpcOpenMemHandle_v2", a.cuIpcOpenMemHandle(&p, mh, cuIpcMemLazyEnablePeerAccess)); err != nil {
				return 0, err
			}
			d.ipc.mu.Lock()
			defer d.ipc.mu.Unlock()
			if d.ipc.closed { // teardown ran meanwhile: unmap at once
				a.cuIpcCloseMemHandle(p)
				return 0, closedf("ipc import: device closed")
			}
			if d.ipc.imports == nil {
				d.ipc.imports = map[ipcMemHandle]uintptr{}
			}
			d.ipc.imports[mh] = p
			return p, nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: ipc import %v: %w", h, err)
	}
	b.dptr = base + uintptr(h.Offset)
	return b, nil
}

// exported is an allocation's base address and handle.
type exported struct {
	base uintptr
	mh   ipcMemHandle
}

// teardown hands the imports' unmapping to the reaper; d.mu is held.
func (c *ipcCache) teardown(d *Device) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	a := d.api
	for _, p := range c.imports {
		d.queueFree(func() { a.cuIpcCloseMemHandle(p) })
	}
	c.imports, c.exports = nil, nil
}
