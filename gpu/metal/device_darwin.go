//go:build darwin

package metal

/*
#cgo LDFLAGS: -framework Metal -framework CoreGraphics
void *MTLCreateSystemDefaultDevice(void);
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/progrium/darwinkit/macos/metal"
	"github.com/progrium/darwinkit/objc"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/metalshader"
)

// gpuFamilyMetal3 is MTLGPUFamilyMetal3, missing from darwinkit's enum.
const gpuFamilyMetal3 = metal.GPUFamily(5001)

// Device is a gpu.Device on the system default Metal GPU. It owns the
// MTLDevice (+1 from MTLCreateSystemDefaultDevice), the compiled pipelines,
// and tracks its queues, buffers and words so that Close releases every
// one of them. Methods are safe for concurrent use; after Close they
// return gpu.ErrClosed.
type Device struct {
	cfg   config
	dev   metal.DeviceObject
	props gpu.Properties
	pipes *pipelines

	mu     sync.Mutex
	closed bool
	queues map[*queue]struct{}
	bufs   map[*buffer]struct{}
	words  map[fenceWord]struct{}
}

var _ gpu.Device = (*Device)(nil)

// Open opens the system default Metal device. Errors wrap gpu.ErrNoBackend
// when there is no Metal GPU, and name the failing step otherwise (a fast
// fence mode on an OS without MSL 3.2, a shader that does not compile).
func Open(opts ...Option) (gpu.Device, error) {
	c := defaultConfig()
	for _, o := range opts {
		o(&c)
	}
	p := C.MTLCreateSystemDefaultDevice()
	if p == nil {
		return nil, fmt.Errorf("metal: open: MTLCreateSystemDefaultDevice returned nil (no Metal GPU): %w", gpu.ErrNoBackend)
	}
	dev := metal.DeviceObject{Object: objc.ObjectFrom(unsafe.Pointer(p))}
	d := &Device{
		cfg:    c,
		dev:    dev,
		pipes:  newPipelines(dev),
		queues: map[*queue]struct{}{},
		bufs:   map[*buffer]struct{}{},
		words:  map[fenceWord]struct{}{},
	}
	var name string
	objc.WithAutoreleasePool(func() { name = dev.Name() })
	d.props = gpu.Properties{
		Backend:              Name,
		Name:                 name,
		MemoryBytes:          dev.RecommendedMaxWorkingSetSize(),
		HostVisibleDeviceMem: true,
	}
	if err := d.prepare(); err != nil {
		d.pipes.release()
		dev.Release()
		return nil, err
	}
	return d, nil
}

// prepare checks the fence mode's requirements and compiles the libraries
// the device needs, so that a shader or OS problem shows at Open.
func (d *Device) prepare() error {
	libs := []string{metalshader.OpsLibrary}
	if d.cfg.fence == FenceShared {
		if !d.dev.SupportsFamily(gpuFamilyMetal3) {
			return fmt.Errorf("metal: open: fence mode shared needs a Metal3 GPU (%s is not): %w", d.props.Name, gpu.ErrBadArgument)
		}
		libs = append(libs, metalshader.FenceLibrary)
	}
	for _, name := range libs {
		if err := d.pipes.compile(name); err != nil {
			return fmt.Errorf("metal: open: %w", err)
		}
	}
	return nil
}

// Properties implements gpu.Device.
func (d *Device) Properties() gpu.Properties { return d.props }

// FenceMode reports the device's fence mode.
func (d *Device) FenceMode() FenceMode { return d.cfg.fence }

// NewQueue implements gpu.Device: one MTLCommandQueue per queue.
func (d *Device) NewQueue() (gpu.Queue, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosedf("new queue: device")
	}
	q, err := newQueue(d)
	if err != nil {
		return nil, err
	}
	d.queues[q] = struct{}{}
	return q, nil
}

// Alloc implements gpu.Device. Both memory kinds are shared-storage
// buffers: Apple GPUs have unified memory.
func (d *Device) Alloc(n int, kind gpu.MemKind) (gpu.Buffer, error) {
	if n < 0 {
		return nil, errBadf("alloc: negative size %d", n)
	}
	if kind != gpu.DeviceMem && kind != gpu.HostMem {
		return nil, errBadf("alloc: unknown memory kind %d", kind)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosedf("alloc: device")
	}
	b, err := newBuffer(d, n, kind)
	if err != nil {
		return nil, err
	}
	d.bufs[b] = struct{}{}
	return b, nil
}

// NewFenceWord implements gpu.Device: an MTLSharedEvent or a shared-storage
// word, by the device's fence mode.
func (d *Device) NewFenceWord() (gpu.FenceWord, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosedf("new fence word: device")
	}
	var w fenceWord
	var err error
	if d.cfg.fence == FenceShared {
		w, err = newSharedWord(d)
	} else {
		w, err = newEventWord(d)
	}
	if err != nil {
		return nil, err
	}
	d.words[w] = struct{}{}
	return w, nil
}

// Close implements gpu.Device: close every queue (each bounded by the
// close timeout), free every buffer and word, release the pipelines and
// the device. A second Close returns nil.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	queues := keys(d.queues)
	bufs := keys(d.bufs)
	words := keys(d.words)
	d.mu.Unlock()

	var errs []error
	for _, q := range queues {
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.closeTimeout)
		if err := q.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	for _, w := range words {
		w.Free()
	}
	for _, b := range bufs {
		b.Free()
	}
	d.pipes.release()
	d.dev.Release()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("metal: close device: %w", err)
	}
	return nil
}

func (d *Device) forgetQueue(q *queue) {
	d.mu.Lock()
	delete(d.queues, q)
	d.mu.Unlock()
}

func (d *Device) forgetBuffer(b *buffer) {
	d.mu.Lock()
	delete(d.bufs, b)
	d.mu.Unlock()
}

func (d *Device) forgetWord(w fenceWord) {
	d.mu.Lock()
	delete(d.words, w)
	d.mu.Unlock()
}

func keys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
