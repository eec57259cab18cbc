//go:build linux

package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/pool"
)

// Device is the CUDA gpu.Device: one GPU's primary context, retained for
// the Device's lifetime. Its driver work runs on driver threads (see
// driverThread): "main" for allocations, streams and the kernel module,
// "reaper" for deferred frees; queues issue through onContext. Devices
// share nothing but the process-wide driver table, so several may live in
// one process
// (they share the primary context, which the driver reference-counts).
// Methods are safe for concurrent use; after Close they return errors
// wrapping gpu.ErrClosed.
type Device struct {
	api   *api
	opts  Options
	dev   cuDevice
	ctx   cuContext
	props gpu.Properties
	uuid  [16]byte // the device's UUID: its IPC identity (ipc.go)

	main  *driverThread
	kern  *kernels
	words wordPool

	reaperDone <-chan struct{}
	reaperWake chan struct{}

	mu     sync.Mutex
	closed bool
	queues map[*queue]struct{}
	// kicks holds every open queue, for word.Store to wake their pollers.
	kicks     atomic.Pointer[[]*queue]
	live      map[*buffer]struct{} // buffers whose memory is not yet given back
	liveWords map[*word]struct{}
	hostCache pool.Lists[int, hostBlock] // free pinned host blocks by size class
	devCache  pool.Lists[int, uintptr]   // free device blocks by size class
	devSlabs  []uintptr                  // device slabs small blocks are carved from
	hostSlabs []unsafe.Pointer           // pinned slabs small blocks are carved from
	frees     []func()                   // driver calls for the reaper
	ipc       ipcCache                   // exported and imported allocations (ipc.go)
	reaperEnd bool                       // reaper: exit once frees is empty
}

var (
	_ gpu.Device       = (*Device)(nil)
	_ gpu.AllocCounter = (*Device)(nil)
)

// New opens the device opts.Ordinal with opts. Errors wrap ErrUnavailable
// and gpu.ErrNoBackend when this machine has no usable driver or device,
// and ErrNoKernels (and gpu.ErrNoBackend) when the embedded PTX is missing.
func New(opts Options) (*Device, error) {
	opts = opts.withDefaults()
	a, err := loadAPI()
	if err != nil {
		return nil, err
	}
	ptx, err := embeddedPTX()
	if err != nil {
		return nil, err
	}
	var count int32
	if err := a.errorf("cuDeviceGetCount", a.cuDeviceGetCount(&count)); err != nil {
		return nil, unavailablef("cuda: %v", err)
	}
	if opts.Ordinal < 0 || opts.Ordinal >= int(count) {
		return nil, unavailablef("cuda: device %d requested, driver reports %d", opts.Ordinal, count)
	}
	d := &Device{
		api:        a,
		opts:       opts,
		reaperWake: make(chan struct{}, 1),
		queues:     map[*queue]struct{}{},
		live:       map[*buffer]struct{}{},
		liveWords:  map[*word]struct{}{},
	}
	if err := d.describe(); err != nil {
		return nil, err
	}
	if err := a.errorf("cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain(&d.ctx, d.dev)); err != nil {
		return nil, unavailablef("cuda: %v", err)
	}
	if err := d.start(ptx); err != nil {
		d.teardown()
		return nil, err
	}
	return d, nil
}

// describe fills in the device handle and Properties and checks that the
// device can map host memory into its unified address space.
func (d *Device) describe() error {
	a := d.api
	if err := a.errorf("cuDeviceGet", a.cuDeviceGet(&d.dev, int32(d.opts.Ordinal))); err != nil {
		return unavailablef("cuda: %v", err)
	}
	name := make([]byte, deviceNameBufferCapacity)
	if err := a.errorf("cuDeviceGetName", a.cuDeviceGetName(&name[0], int32(len(name)), d.dev)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	var total uint64
	if err := a.errorf("cuDeviceTotalMem_v2", a.cuDeviceTotalMem(&total, d.dev)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if err := a.errorf("cuDeviceGetUuid_v2", a.cuDeviceGetUuid(&d.uuid, d.dev)); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	attr := func(id int32) (int32, error) {
		var v int32
		if err := a.errorf("cuDeviceGetAttribute", a.cuDeviceGetAttribute(&v, id, d.dev)); err != nil {
			return 0, fmt.Errorf("cuda: attribute %d: %w", id, err)
		}
		return v, nil
	}
	var vals [4]int32
	for i, id := range []int32{attrComputeCapMajor, attrComputeCapMinor, attrUnifiedAddressing, attrCanMapHostMemory} {
		v, err := attr(id)
		if err != nil {
			return err
		}
		vals[i] = v
	}
	if vals[2] == 0 || vals[3] == 0 {
		return unavailablef("cuda: device %d lacks unified addressing (%d) or host-memory mapping (%d)", d.opts.Ordinal, vals[2], vals[3])
	}
	if i := strings.IndexByte(string(name), 0); i >= 0 {
		name = name[:i]
	}
	d.props = gpu.Properties{
		Backend:           Name,
		Name:              string(name),
		MemoryBytes:       total,
		ComputeCapability: fmt.Sprintf("%d.%d", vals[0], vals[1]),
	}
	return nil
}

// start brings up the driver threads, the zero-fill stream and the kernels.
func (d *Device) start(ptx []byte) error {
	a := d.api
	var err error
	if d.main, err = startThread(a, d.ctx, "main"); err != nil {
		return fmt.Errorf("cuda: main thread: %w", err)
	}
	if d.reaperDone, err = startLoop(a, d.ctx, d.reap); err != nil {
		d.reaperDone = nil
		return fmt.Errorf("cuda: reaper thread: %w", err)
	}
	d.kern, err = call(d.main, func() (*kernels, error) { return loadKernels(a, ptx) })
	return err
}

// reap runs queued frees until Close ends it; its body runs on a driver
// thread of its own, so a cuMemFree that waits for the GPU holds up no
// one else.
func (d *Device) reap() {
	for {
		d.mu.Lock()
		work := d.frees
		d.frees = nil
		end := d.reaperEnd && len(work) == 0
		d.mu.Unlock()
		if end {
			return
		}
		for _, f := range work {
			f()
		}
		if len(work) == 0 {
			<-d.reaperWake
		}
	}
}

// queueFree hands f to the reaper; d.mu must be held.
func (d *Device) queueFree(f func()) {
	d.frees = append(d.frees, f)
	select {
	case d.reaperWake <- struct{}{}:
	default:
	}
}

// Properties implements gpu.Device.
func (d *Device) Properties() gpu.Properties { return d.props }

// Options returns the options the device was opened with.
func (d *Device) Options() Options { return d.opts }

// Alloc implements gpu.Device.
func (d *Device) Alloc(n int, kind gpu.MemKind) (gpu.Buffer, error) {
	if n < 0 {
		return nil, badArgf("alloc: negative size %d", n)
	}
	if kind != gpu.DeviceMem && kind != gpu.HostMem {
		return nil, badArgf("alloc: unknown memory kind %d", kind)
	}
	if d.isClosed() {
		return nil, closedf("alloc: device closed")
	}
	// A cached block needs no driver call, so no hop to the main thread.
	b := d.allocCached(n, kind)
	if b == nil {
		var err error
		if b, err = call(d.main, func() (*buffer, error) { return d.alloc(n, kind) }); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		f := b.freeFunc()
		do(d.main, func() error { f(); return nil })
		return nil, closedf("alloc: device closed")
	}
	d.live[b] = struct{}{}
	d.mu.Unlock()
	return b, nil
}

// NewFenceWord implements gpu.Device.
func (d *Device) NewFenceWord() (gpu.FenceWord, error) {
	if d.isClosed() {
		return nil, closedf("new fence word: device closed")
	}
	return d.newWord()
}

// NewQueue implements gpu.Device.
func (d *Device) NewQueue() (gpu.Queue, error) {
	if d.isClosed() {
		return nil, closedf("new queue: device closed")
	}
	return d.newQueue()
}

func (d *Device) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// Close implements gpu.Device: it closes every queue (each bounded by
// Options.CloseTimeout, after which the queue releases its pending waits),
// gives back all memory, unloads the kernels and releases the primary
// context. Idempotent.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	qs := make([]*queue, 0, len(d.queues))
	for q := range d.queues {
		qs = append(qs, q)
	}
	d.mu.Unlock()

	var errs []error
	for _, q := range qs {
		ctx, cancel := context.WithTimeout(context.Background(), d.opts.CloseTimeout)
		if err := q.Close(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, err)
		}
		cancel()
	}
	d.teardown()
	if len(errs) > 0 {
		return fmt.Errorf("cuda: close device: %w", errors.Join(errs...))
	}
	return nil
}

// teardown frees everything New or later calls made. Words are frozen
// first (no CPU access after this), then all memory goes to the reaper,
// which finishes before the main thread unloads the module and the
// primary context is released.
func (d *Device) teardown() {
	a := d.api
	d.mu.Lock()
	d.closed = true
	words := make([]*word, 0, len(d.liveWords))
	for w := range d.liveWords {
		words = append(words, w)
	}
	d.mu.Unlock()
	for _, w := range words {
		w.Free()
	}

	d.mu.Lock()
	for b := range d.live {
		d.queueFree(b.freeFunc())
	}
	d.live = map[*buffer]struct{}{}
	for class, blk := range d.hostCache.All() {
		if h := blk.host; class > carveMax {
			d.queueFree(func() { a.cuMemFreeHost(h) })
		}
	}
	d.hostCache.Clear()
	for class, p := range d.devCache.All() {
		if class > carveMax {
			d.queueFree(func() { a.cuMemFree(p) })
		}
	}
	d.devCache.Clear()
	for _, h := range d.hostSlabs {
		d.queueFree(func() { a.cuMemFreeHost(h) })
	}
	for _, p := range d.devSlabs {
		d.queueFree(func() { a.cuMemFree(p) })
	}
	d.hostSlabs, d.devSlabs = nil, nil
	d.ipc.teardown(d)
	d.words.mu.Lock()
	for _, s := range d.words.slabs {
		d.queueFree(func() { a.cuMemFreeHost(s) })
	}
	d.words.slabs, d.words.free = nil, nil
	d.words.mu.Unlock()
	d.reaperEnd = true
	d.queueFree(func() {})
	d.mu.Unlock()
	if d.reaperDone != nil {
		<-d.reaperDone
	}

	if d.main != nil {
		do(d.main, func() error {
			if d.kern != nil {
				a.cuModuleUnload(d.kern.module)
			}
			return nil
		})
		d.main.stop()
	}
	a.cuDevicePrimaryCtxRelease(d.dev)
}

// Name is the name the backend registers under.
const Name = "cuda"

// Options configure a Device. The zero value is the default.
type Options struct {
	// Ordinal is the device index (cuDeviceGet); 0 by default.
	Ordinal int
	// MonotonicKernel makes WriteValue launch a one-thread kernel that
	// stores max(word, v) after a system-wide fence, instead of the stream
	// memory operation cuStreamWriteValue32 (a plain store). See the
	// package documentation for why memop is the default.
	MonotonicKernel bool
	// MaxInflightBatches and MaxInflightCommands bound the work a queue
	// has handed to the driver and not yet seen complete (64 and 512 by
	// default); more waits in the queue's own FIFO. They keep the issuing
	// thread out of the driver's full launch queue behind a blocked wait.
	MaxInflightBatches  int
	MaxInflightCommands int
	// CloseTimeout bounds how long Device.Close waits for each queue to
	// drain before it releases the queue's waits (2 s by default).
	CloseTimeout time.Duration
	// DrainTimeout bounds how long Queue.Close waits for the stream to
	// drain after it released the waits (5 s by default); past it the
	// unfinished batches fail with ErrClosed without waiting longer.
	DrainTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.MaxInflightBatches <= 0 {
		o.MaxInflightBatches = 64
	}
	if o.MaxInflightCommands <= 0 {
		o.MaxInflightCommands = 512
	}
	o.MaxInflightCommands = max(o.MaxInflightCommands, 4)
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 2 * time.Second
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 5 * time.Second
	}
	return o
}

// DriverAllocs counts the memory allocations this process has asked of the
// CUDA driver (device and pinned host memory, slabs included; every Device
// of the process together): a call served from the caches adds nothing,
// so a hot path that allocates nothing after warm-up keeps it still.
func (d *Device) DriverAllocs() uint64 { return d.api.allocs.Load() }
