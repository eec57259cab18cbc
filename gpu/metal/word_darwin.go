//go:build darwin

package metal

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/progrium/darwinkit/macos/metal"

	"github.com/choreo-gpu/choreo/gpu"
)

// fenceWord is a gpu.FenceWord of this backend: a sharedWord or an
// eventWord, by the device's fence mode.
type fenceWord interface {
	gpu.FenceWord
	owner() *Device
	live() bool
}

// sharedWord is a fence word in a 16-byte shared-storage MTLBuffer (+1,
// released by Free): the GPU reaches it through the fence kernels, the CPU
// through atomics on the buffer's contents. Load after Free returns the
// last value; Store and Reset after Free do nothing; Wait after Free fails
// with ErrClosed. Commands retain the buffer until their batch completes,
// so its storage is not reused while a queued command names it. Safe for
// concurrent use.
type sharedWord struct {
	dev *Device

	mu    sync.RWMutex
	obj   metal.BufferObject
	p     *uint32
	last  uint32
	freed bool
}

func newSharedWord(d *Device) (*sharedWord, error) {
	obj := d.dev.NewBufferWithLengthOptions(bufferAlign, arrayOptions) // +1
	if obj.IsNil() {
		return nil, fmt.Errorf("metal: new fence word: newBufferWithLength returned nil: %w", gpu.ErrOutOfMemory)
	}
	p := (*uint32)(obj.Contents())
	atomic.StoreUint32(p, 0)
	return &sharedWord{dev: d, obj: obj, p: p}, nil
}

func (w *sharedWord) owner() *Device { return w.dev }

func (w *sharedWord) live() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return !w.freed
}

// Load implements gpu.FenceWord.
func (w *sharedWord) Load() uint32 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.freed {
		return w.last
	}
	return atomic.LoadUint32(w.p)
}

// Store implements gpu.FenceWord: word = max(word, v). The CPU is the
// word's only writer when it stores, the loop guards against
// concurrent CPU stores.
func (w *sharedWord) Store(v uint32) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.freed {
		return
	}
	for {
		old := atomic.LoadUint32(w.p)
		if old >= v || atomic.CompareAndSwapUint32(w.p, old, v) {
			return
		}
	}
}

// Wait implements gpu.FenceWord by polling (pollUntil).
func (w *sharedWord) Wait(ctx context.Context, v uint32, cancel <-chan struct{}) error {
	return pollUntil(ctx, cancel, fmt.Sprintf("wait word >= %d", v), func() (bool, error) {
		w.mu.RLock()
		defer w.mu.RUnlock()
		if w.freed {
			return false, errClosedf("wait word >= %d: word", v)
		}
		return atomic.LoadUint32(w.p) >= v, nil
	})
}

// Reset implements gpu.FenceWord.
func (w *sharedWord) Reset() {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if !w.freed {
		atomic.StoreUint32(w.p, 0)
	}
}

// Free implements gpu.FenceWord.
func (w *sharedWord) Free() {
	w.mu.Lock()
	if w.freed {
		w.mu.Unlock()
		return
	}
	w.last = atomic.LoadUint32(w.p)
	w.freed = true
	w.obj.Release()
	w.obj, w.p = metal.BufferObject{}, nil
	w.mu.Unlock()
	w.dev.forgetWord(w)
}

// ref retains the word's buffer for a batch (released when it completes).
func (w *sharedWord) ref() (metal.BufferObject, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.freed {
		return metal.BufferObject{}, errClosedf("fence word was freed")
	}
	w.obj.Retain()
	return w.obj, nil
}

// eventWord is a fence word on an MTLSharedEvent (+1, released by Free).
// MTLSharedEvent values are 64-bit and only grow, so the word is the
// event's signaledValue minus a base that Reset moves up to the current
// value; the GPU waits for and signals base+v. Load/Store/Wait after Free
// behave as for sharedWord. Safe for concurrent use.
type eventWord struct {
	dev *Device

	mu    sync.Mutex
	ev    metal.SharedEventObject
	base  uint64
	last  uint32
	freed bool
}

func newEventWord(d *Device) (*eventWord, error) {
	ev := d.dev.NewSharedEvent() // +1
	if ev.IsNil() {
		return nil, fmt.Errorf("metal: new fence word: newSharedEvent returned nil: %w", gpu.ErrOutOfMemory)
	}
	return &eventWord{dev: d, ev: ev, base: ev.SignaledValue()}, nil
}

func (w *eventWord) owner() *Device { return w.dev }

func (w *eventWord) live() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.freed
}

// value is the word's current value. w.mu is held and the word is live.
func (w *eventWord) value() uint32 {
	sv := w.ev.SignaledValue()
	if sv <= w.base {
		return 0
	}
	return uint32(min(sv-w.base, math.MaxUint32))
}

// Load implements gpu.FenceWord.
func (w *eventWord) Load() uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.freed {
		return w.last
	}
	return w.value()
}

// Store implements gpu.FenceWord: raise the event to base+v unless it is
// there already (an event is never set lower).
func (w *eventWord) Store(v uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.freed {
		return
	}
	if t := w.base + uint64(v); w.ev.SignaledValue() < t {
		w.ev.SetSignaledValue(t)
	}
}

// Wait implements gpu.FenceWord by polling signaledValue (pollUntil).
func (w *eventWord) Wait(ctx context.Context, v uint32, cancel <-chan struct{}) error {
	return pollUntil(ctx, cancel, fmt.Sprintf("wait event >= %d", v), func() (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.freed {
			return false, errClosedf("wait event >= %d: word", v)
		}
		return w.value() >= v, nil
	})
}

// Reset implements gpu.FenceWord: the current value becomes the new zero.
func (w *eventWord) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.freed {
		w.base = w.ev.SignaledValue()
	}
}

// Free implements gpu.FenceWord.
func (w *eventWord) Free() {
	w.mu.Lock()
	if w.freed {
		w.mu.Unlock()
		return
	}
	w.last = w.value()
	w.freed = true
	w.ev.Release()
	w.ev = metal.SharedEventObject{}
	w.mu.Unlock()
	w.dev.forgetWord(w)
}

// ref retains the event for a batch and returns it with the base that
// turns word values into event values.
func (w *eventWord) ref() (metal.SharedEventObject, uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.freed {
		return metal.SharedEventObject{}, 0, errClosedf("fence word was freed")
	}
	w.ev.Retain()
	return w.ev, w.base, nil
}
