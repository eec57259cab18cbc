package sim

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"
	"weak"

	"github.com/choreo-gpu/choreo/gpu"
)

// The sim's gpu.IPCDevice. Its memory is the process's, so an export can
// be imported only in the process that made it (an import elsewhere fails
// with gpu.ErrBadArgument); within it, the collectives' path for ranks in
// separate processes runs on in-process ranks as it would across
// processes, which is how the tests exercise it without a GPU. A handle
// names an exported buffer by a number this process gave it and the
// process's id; a buffer keeps its number while it lives, and the
// registry forgets it when the collector takes the buffer.

var _ gpu.IPCDevice = (*Device)(nil)

var ipcExports struct {
	mu   sync.Mutex
	next uint64
	ids  map[weak.Pointer[buffer]]uint64
	bufs map[uint64]weak.Pointer[buffer]
}

// ID implements gpu.IPCDevice: a random identity, fixed for the device.
func (d *Device) ID() [16]byte {
	d.ipcOnce.Do(func() { _, _ = rand.Read(d.ipcID[:]) })
	return d.ipcID
}

// Export implements gpu.IPCDevice.
func (d *Device) Export(b gpu.Buffer) (gpu.IPCHandle, error) {
	var h gpu.IPCHandle
	sb, ok := b.(*buffer)
	switch {
	case !ok || sb.dev != d:
		return h, errBadf("ipc export: a buffer of another device")
	case sb.kind != gpu.DeviceMem:
		return h, errBadf("ipc export: %s memory cannot be shared with other processes (device memory can)", sb.kind)
	case sb.freed.Load():
		return h, fmt.Errorf("sim: ipc export: buffer freed: %w", gpu.ErrClosed)
	}
	e := &ipcExports
	e.mu.Lock()
	defer e.mu.Unlock()
	wp := weak.Make(sb)
	id, ok := e.ids[wp]
	if !ok {
		if e.ids == nil {
			e.ids, e.bufs = map[weak.Pointer[buffer]]uint64{}, map[uint64]weak.Pointer[buffer]{}
		}
		e.next++
		id = e.next
		e.ids[wp], e.bufs[id] = id, wp
		runtime.AddCleanup(sb, func(id uint64) {
			e.mu.Lock()
			defer e.mu.Unlock()
			delete(e.ids, e.bufs[id])
			delete(e.bufs, id)
		}, id)
	}
	binary.LittleEndian.PutUint64(h.Mem[:], id)
	binary.LittleEndian.PutUint64(h.Mem[8:], uint64(os.Getpid()))
	h.Len = uint64(sb.n)
	return h, nil
}

// Import implements gpu.IPCDevice: an alias of the exported buffer's
// memory, for this device's peer tables.
func (d *Device) Import(h gpu.IPCHandle) (gpu.Buffer, error) {
	if pid := binary.LittleEndian.Uint64(h.Mem[8:]); pid != uint64(os.Getpid()) {
		return nil, errBadf("ipc import: the sim's memory is its process's (exported by process %d)", pid)
	}
	e := &ipcExports
	e.mu.Lock()
	wp, ok := e.bufs[binary.LittleEndian.Uint64(h.Mem[:])]
	e.mu.Unlock()
	var sb *buffer
	if ok {
		sb = wp.Value()
	}
	switch {
	case sb == nil || sb.freed.Load():
		return nil, fmt.Errorf("sim: ipc import %v: the exported buffer is gone: %w", h, gpu.ErrClosed)
	case sb.dev != d:
		return nil, errBadf("ipc import %v: memory of another device", h)
	case h.Offset != 0 || h.Len != uint64(sb.n):
		return nil, errBadf("ipc import %v: the export is of %d bytes at offset 0", h, sb.n)
	}
	return &buffer{dev: d, data: sb.data, n: sb.n, kind: sb.kind, alias: true}, nil
}
