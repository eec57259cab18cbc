package sim

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/pool"
)

// Device is one software GPU. Its methods are safe for concurrent use. It
// owns every queue, buffer and word made from it: Close closes the queues
// (draining each for at most the close timeout, then releasing its waits),
// frees the buffers and words, and from then on every call returns an error
// wrapping gpu.ErrClosed.
type Device struct {
	cfg config

	mu      sync.Mutex
	closed  bool
	used    uint64 // bytes of live buffers, against cfg.memoryBytes
	queues  map[*queue]struct{}
	buffers map[*buffer]struct{}
	words   map[*word]struct{}
	cache   pool.Lists[int, []byte] // free blocks by size, held in cfg.pool (see cache.go)

	ipcOnce sync.Once
	ipcID   [16]byte // the device's IPC identity (ipc.go)
}

var _ gpu.Device = (*Device)(nil)

func newDevice(c config) *Device {
	return &Device{
		cfg:     c,
		queues:  map[*queue]struct{}{},
		buffers: map[*buffer]struct{}{},
		words:   map[*word]struct{}{},
	}
}

// Properties implements gpu.Device.
func (d *Device) Properties() gpu.Properties {
	if d.cfg.staged {
		return gpu.Properties{Backend: StagedName, Name: "choreo software GPU (device memory hidden from the CPU)",
			MemoryBytes: d.cfg.memoryBytes}
	}
	return gpu.Properties{
		Backend:              Name,
		Name:                 "choreo software GPU",
		MemoryBytes:          d.cfg.memoryBytes,
		HostVisibleDeviceMem: true,
	}
}

// NewQueue implements gpu.Device: it starts the queue's goroutine.
func (d *Device) NewQueue() (gpu.Queue, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosedf("new queue: device")
	}
	q := newQueue(d)
	d.queues[q] = struct{}{}
	return q, nil
}

// Alloc implements gpu.Device: a 64-byte aligned buffer; HostMem is
// zero-filled, DeviceMem may hold a reused block's old contents. An
// allocation beyond the device's memory or the host's fails with
// gpu.ErrOutOfMemory before any Go memory is taken (see reserve).
func (d *Device) Alloc(n int, kind gpu.MemKind) (gpu.Buffer, error) {
	if n < 0 {
		return nil, errBadf("alloc: negative size %d", n)
	}
	if kind != gpu.DeviceMem && kind != gpu.HostMem {
		return nil, errBadf("alloc: unknown memory kind %d", kind)
	}
	raw, size, err := d.reserve(n)
	if err != nil {
		return nil, err
	}

	b := newBuffer(d, n, kind, raw, size)

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed { // closed while we allocated
		d.used -= uint64(n)
		b.recycled.Store(true)
		d.cfg.pool.drop(uint64(size))
		return nil, errClosedf("alloc: device")
	}
	d.buffers[b] = struct{}{}
	return b, nil
}

// reserve accounts for an n-byte buffer before any Go memory is taken. It
// returns a cached block for it, or nil and the size of the block to make,
// whose bytes it took from the host pool: a size class, or n itself when
// the class does not fit. If even that does not fit, it gives the device's
// cache up and, once, forces a collection of the blocks given up so far
// (rare: only near the host's limit). It fails with gpu.ErrOutOfMemory
// when the device's memory or the host's cannot hold the buffer.
func (d *Device) reserve(n int) (raw []byte, size int, err error) {
	host := d.cfg.pool
	for collected := false; ; collected = true {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return nil, 0, errClosedf("alloc: device")
		}
		if uint64(n) > d.cfg.memoryBytes-d.used {
			used := d.used
			d.mu.Unlock()
			return nil, 0, fmt.Errorf("sim: alloc: %d bytes with %d of %d in use: %w",
				n, used, d.cfg.memoryBytes, gpu.ErrOutOfMemory)
		}
		if raw := d.takeCachedLocked(n); raw != nil {
			d.used += uint64(n)
			d.mu.Unlock()
			return raw, blockSize(n), nil
		}
		size = blockSize(n)
		ok := host.take(uint64(size))
		if !ok && size != n {
			size = n
			ok = host.take(uint64(size))
		}
		if ok {
			d.used += uint64(n)
			d.mu.Unlock()
			return nil, size, nil
		}
		d.dropCacheLocked() // its blocks count until the collection below
		d.mu.Unlock()
		dropped := host.dropped.Load()
		if collected || dropped == 0 || uint64(n) > host.budget {
			return nil, 0, fmt.Errorf("sim: alloc: %d bytes: sim devices hold %d of the %d bytes this host can give them: %w",
				n, host.held.Load(), host.budget, gpu.ErrOutOfMemory)
		}
		// Blocks given up earlier may still fill the heap: a collection
		// frees them for this one.
		runtime.GC()
		host.collected(dropped)
	}
}

// NewFenceWord implements gpu.Device.
func (d *Device) NewFenceWord() (gpu.FenceWord, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosedf("new fence word: device")
	}
	w := newWord(d)
	d.words[w] = struct{}{}
	return w, nil
}

// Close implements gpu.Device. It closes every queue as Queue.Close does,
// each bounded by the close timeout (WithCloseTimeout), then frees every
// buffer and word. It returns the queues' close errors, joined (they wrap
// context.DeadlineExceeded when work had to be abandoned); a second Close
// returns an error wrapping gpu.ErrClosed.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return errClosedf("close: device")
	}
	d.closed = true
	queues := make([]*queue, 0, len(d.queues))
	for q := range d.queues {
		queues = append(queues, q)
	}
	d.mu.Unlock()

	// Close the queues concurrently so the bound holds for the device as a
	// whole, not per queue.
	errs := make([]error, len(queues))
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.closeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, q := range queues {
		wg.Go(func() {
			if err := q.Close(ctx); err != nil {
				errs[i] = fmt.Errorf("sim: close device: %w", err)
			}
		})
	}
	wg.Wait()

	d.mu.Lock()
	buffers, words := d.buffers, d.words
	d.buffers, d.words, d.queues = nil, nil, nil
	d.dropCacheLocked()
	d.mu.Unlock()
	for b := range buffers {
		b.free()
	}
	for w := range words {
		w.free()
	}
	return errors.Join(errs...)
}

// forgetQueue, forgetBuffer and forgetWord drop a closed or freed object
// from the device's tables.
func (d *Device) forgetQueue(q *queue) {
	d.mu.Lock()
	delete(d.queues, q)
	d.mu.Unlock()
}

func (d *Device) forgetBuffer(b *buffer) {
	d.mu.Lock()
	if _, ok := d.buffers[b]; ok {
		delete(d.buffers, b)
		d.used -= uint64(b.n)
	}
	d.mu.Unlock()
}

func (d *Device) forgetWord(w *word) {
	d.mu.Lock()
	delete(d.words, w)
	d.mu.Unlock()
}
