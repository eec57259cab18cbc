package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/choreo-gpu/choreo/gpu"
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
	used    uint64 // bytes held by live buffers
	queues  map[*queue]struct{}
	buffers map[*buffer]struct{}
	words   map[*word]struct{}
	cache   map[int][][]byte // free blocks by size (see cache.go)
	cached  int              // bytes in cache
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
// zero-filled, DeviceMem may hold a reused block's old contents.
func (d *Device) Alloc(n int, kind gpu.MemKind) (gpu.Buffer, error) {
	if n < 0 {
		return nil, errBadf("alloc: negative size %d", n)
	}
	if kind != gpu.DeviceMem && kind != gpu.HostMem {
		return nil, errBadf("alloc: unknown memory kind %d", kind)
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, errClosedf("alloc: device")
	}
	if uint64(n) > d.cfg.memoryBytes-d.used {
		used := d.used
		d.mu.Unlock()
		return nil, fmt.Errorf("sim: alloc: %d bytes with %d of %d in use: %w",
			n, used, d.cfg.memoryBytes, gpu.ErrOutOfMemory)
	}
	d.used += uint64(n)
	d.mu.Unlock()

	b := newBuffer(d, n, kind)

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed { // closed while we allocated
		d.used -= uint64(n)
		return nil, errClosedf("alloc: device")
	}
	d.buffers[b] = struct{}{}
	return b, nil
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
	d.cache, d.cached = nil, 0
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
