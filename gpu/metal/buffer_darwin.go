//go:build darwin

package metal

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/progrium/darwinkit/macos/metal"

	"github.com/choreo-gpu/choreo/gpu"
)

// bufferAlign is the granule buffer lengths are rounded up to, so that
// input_coherent may touch whole 32-bit words and no MTLBuffer is empty.
const bufferAlign = 16

// arrayOptions: shared storage, hazards not tracked by Metal. A queue
// orders its own commands (serial encoder, barriers, the tracked status
// buffer); queues order each other only through fences, as on every
// backend. Tracking would let Metal hold one queue's reader behind another
// queue's encoder that spins in fence_wait.
const arrayOptions = metal.ResourceStorageModeShared | metal.ResourceHazardTrackingModeUntracked

// buffer is a gpu.Buffer on a shared-storage MTLBuffer (+1, released by
// Free). Bytes aliases the buffer's contents. A command that names the
// buffer retains the MTLBuffer until its batch completes, so Free never
// pulls memory from under the GPU. Safe for concurrent use.
type buffer struct {
	dev  *Device
	n    int
	kind gpu.MemKind

	mu    sync.RWMutex
	obj   metal.BufferObject
	data  []byte // len n; nil after Free
	freed bool
}

var _ gpu.Buffer = (*buffer)(nil)

// newBuffer allocates a zero-filled buffer of n bytes. d.mu is held.
func newBuffer(d *Device, n int, kind gpu.MemKind) (*buffer, error) {
	size := (max(n, 1) + bufferAlign - 1) / bufferAlign * bufferAlign
	if uint(size) > d.dev.MaxBufferLength() {
		return nil, fmt.Errorf("metal: alloc %d bytes: over the device's maxBufferLength %d: %w",
			n, d.dev.MaxBufferLength(), gpu.ErrOutOfMemory)
	}
	obj := d.dev.NewBufferWithLengthOptions(uint(size), arrayOptions) // +1
	if obj.IsNil() {
		return nil, fmt.Errorf("metal: alloc %d bytes: newBufferWithLength returned nil: %w", n, gpu.ErrOutOfMemory)
	}
	mem := unsafe.Slice((*byte)(obj.Contents()), size)
	clear(mem)
	return &buffer{dev: d, n: n, kind: kind, obj: obj, data: mem[:n:n]}, nil
}

// Len implements gpu.Buffer.
func (b *buffer) Len() int { return b.n }

// Kind implements gpu.Buffer.
func (b *buffer) Kind() gpu.MemKind { return b.kind }

// Bytes implements gpu.Buffer: the shared memory, or nil after Free.
func (b *buffer) Bytes() []byte {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.data
}

// Free implements gpu.Buffer.
func (b *buffer) Free() error {
	b.mu.Lock()
	if b.freed {
		b.mu.Unlock()
		return nil
	}
	b.freed = true
	b.obj.Release()
	b.obj = metal.BufferObject{}
	b.data = nil
	b.mu.Unlock()
	b.dev.forgetBuffer(b)
	return nil
}

// live reports whether the buffer has not been freed.
func (b *buffer) live() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return !b.freed
}

// ref retains the MTLBuffer for a batch (the batch releases it when it
// completes) and returns it with its memory; it fails with ErrClosed after
// Free.
func (b *buffer) ref() (metal.BufferObject, []byte, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.freed {
		return metal.BufferObject{}, nil, errClosedf("buffer of %d bytes was freed", b.n)
	}
	b.obj.Retain()
	return b.obj, b.data, nil
}
