//go:build linux

package cuda

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/choreo-gpu/choreo/gpu"
)

// Fence words live in slabs of pinned, portable, device-mapped host memory
// (cuMemHostAlloc PORTABLE|DEVICEMAP): the CPU reaches a word with
// sync/atomic through its host pointer, the GPU through its unified device
// address (stream memory operations and the monotonic-store kernel). Each
// word has a cache line of its own, so a CPU spinning on one word never
// shares a line with a word the GPU writes.
const (
	slabBytes  = 64 << 10
	wordStride = 64
	slabWords  = slabBytes / wordStride
)

// slot is one word's place in a slab.
type slot struct {
	p    *uint32 // host address
	dptr uintptr // device address
}

// wordPool hands out slots from slabs and takes them back once no queued
// command names them. Slabs are freed only by Device.Close.
type wordPool struct {
	mu    sync.Mutex
	slabs []unsafe.Pointer
	free  []slot
}

// get returns a free slot, allocating a new slab on the device's main
// thread when none is left. The slot's word reads 0.
func (d *Device) getSlot() (slot, error) {
	p := &d.words
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 {
		a := d.api
		base, err := call(d.main, func() (unsafe.Pointer, error) {
			var h unsafe.Pointer
			if err := a.errorf("cuMemHostAlloc", a.cuMemHostAlloc(&h, slabBytes, memHostAllocPortable|memHostAllocDeviceMap)); err != nil {
				return nil, err
			}
			return h, nil
		})
		if err != nil {
			return slot{}, fmt.Errorf("cuda: fence word slab: %w", err)
		}
		var dbase uintptr
		if err := do(d.main, func() error {
			return a.errorf("cuMemHostGetDevicePointer_v2", a.cuMemHostGetDevicePointer(&dbase, base, 0))
		}); err != nil {
			do(d.main, func() error { a.cuMemFreeHost(base); return nil })
			return slot{}, fmt.Errorf("cuda: fence word slab: %w", err)
		}
		clear(unsafe.Slice((*byte)(base), slabBytes))
		p.slabs = append(p.slabs, base)
		for i := slabWords - 1; i >= 0; i-- {
			p.free = append(p.free, slot{
				p:    (*uint32)(unsafe.Add(base, i*wordStride)),
				dptr: dbase + uintptr(i*wordStride),
			})
		}
	}
	s := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	atomic.StoreUint32(s.p, 0)
	return s, nil
}

// releaseWord returns w's slot to the pool once no command names it.
func (d *Device) releaseWord(w *word) {
	d.mu.Lock()
	delete(d.liveWords, w)
	d.mu.Unlock()
	d.words.put(w.s)
}

func (p *wordPool) put(s slot) {
	p.mu.Lock()
	p.free = append(p.free, s)
	p.mu.Unlock()
}

// word is a gpu.FenceWord in host-mapped pinned memory. Store raises it
// with a CAS loop (atomic max), Load is an atomic load, Wait polls (spin,
// then doubling sleeps) until the word is >= v or ctx/cancel ends the
// wait. After Free, Wait fails with gpu.ErrClosed, Store does nothing and
// Load returns the value the word had when it was freed; the slot itself
// returns to the pool only when no queued command names it.
type word struct {
	dev    *Device
	s      slot
	frozen uint32 // value at Free; guarded by l.mu
	// issued is the largest value a WriteValue command has put on a
	// stream for this word (memop mode writes max(issued, v), see queue).
	issued atomic.Uint32
	// cpuMax is the largest value Store put into the word. A queue that
	// completes a WriteValue on the word raises it back to cpuMax (see
	// queue.repair), so a GPU store issued before a CPU release cannot
	// leave the word lowered.
	cpuMax atomic.Uint32
	l      lease
}

var _ gpu.FenceWord = (*word)(nil)

func (w *word) lease() *lease { return &w.l }

func (d *Device) newWord() (*word, error) {
	s, err := d.getSlot()
	if err != nil {
		return nil, err
	}
	w := &word{dev: d, s: s}
	w.l.release = func() { d.releaseWord(w) }
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		d.words.put(s)
		return nil, closedf("new fence word: device closed")
	}
	d.liveWords[w] = struct{}{}
	d.mu.Unlock()
	return w, nil
}

// Every CPU access to the word's memory happens under the lease's lock
// after checking that the word is not freed, so no access can race with
// Device.Close giving the slab back (it freezes every word first).

// Load implements gpu.FenceWord.
func (w *word) Load() uint32 {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if w.l.freed {
		return w.frozen
	}
	return atomic.LoadUint32(w.s.p)
}

// load reads the word's memory for a queue that still holds a reference.
func (w *word) load() uint32 { return atomic.LoadUint32(w.s.p) }

// Store implements gpu.FenceWord: word = max(word, v).
func (w *word) Store(v uint32) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if !w.l.freed {
		for {
			old := w.cpuMax.Load()
			if old >= v || w.cpuMax.CompareAndSwap(old, v) {
				break
			}
		}
		w.raise(v)
	}
	w.dev.kickPollers()
}

// repair raises the word back to the largest value the CPU stored, after
// a GPU write that may have lowered it. No-op for a freed word.
func (w *word) repair() {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if m := w.cpuMax.Load(); m > 0 && !w.l.freed {
		w.raise(m)
	}
}

// raise is the atomic max on the host word.
func (w *word) raise(v uint32) {
	for {
		old := atomic.LoadUint32(w.s.p)
		if old >= v || atomic.CompareAndSwapUint32(w.s.p, old, v) {
			return
		}
	}
}

// reached reports whether the word is >= v; a freed word is an error.
func (w *word) reached(v uint32) (bool, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if w.l.freed {
		return false, closedf("fence wait for %d: word freed", v)
	}
	return atomic.LoadUint32(w.s.p) >= v, nil
}

// Wait implements gpu.FenceWord.
func (w *word) Wait(ctx context.Context, v uint32, cancel <-chan struct{}) error {
	return watchSpin.Wait(ctx, cancel,
		func() (bool, error) { return w.reached(v) },
		func(canceled bool) error {
			cause := ctx.Err()
			if canceled {
				cause = gpu.ErrCanceled
			}
			return fmt.Errorf("cuda: fence wait for %d (word at %d): %w", v, w.Load(), cause)
		})
}

// Reset implements gpu.FenceWord.
func (w *word) Reset() {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	if !w.l.freed {
		atomic.StoreUint32(w.s.p, 0)
		w.issued.Store(0)
		w.cpuMax.Store(0)
	}
}

// Free implements gpu.FenceWord.
func (w *word) Free() {
	w.l.mu.Lock()
	if !w.l.freed {
		w.frozen = atomic.LoadUint32(w.s.p)
	}
	w.l.mu.Unlock()
	w.l.free()
}
