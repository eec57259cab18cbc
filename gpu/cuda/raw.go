//go:build linux

package cuda

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// The raw surface: what an external CUDA library driven through purego
// (NCCL, in gpu/cuda/nccl) needs from a Device. It hands out device
// addresses and stream handles that bypass the queue's ordering and the
// buffers' leases, so the caller takes over what those give: it keeps a
// buffer unfreed and the Device open until the work it enqueued on a raw
// stream has completed (Synchronize), and it orders raw streams against
// queues itself (finish one before handing the memory to the other).

// DevicePointer returns the address GPU work uses for b, a buffer of a
// cuda Device: the device address of DeviceMem, the device-mapped unified
// address of HostMem, 0 for an empty buffer. The address stays valid until
// b is freed; unlike a queued command, raw work naming it takes no lease.
// Errors wrap gpu.ErrBadArgument (nil or not a cuda buffer) or
// gpu.ErrClosed (freed).
func DevicePointer(b gpu.Buffer) (uintptr, error) {
	if b == nil {
		return 0, badArgf("device pointer: nil buffer")
	}
	cb, ok := b.(*buffer)
	if !ok || cb == nil {
		return 0, badArgf("device pointer: %T is not a buffer of the cuda backend", b)
	}
	if cb.l.isFreed() {
		return 0, closedf("device pointer: buffer freed")
	}
	return cb.dptr, nil
}

// OnContext runs f on the calling goroutine with its OS thread locked and
// the device's primary context current on it, for calls into a library
// that takes the CUDA context from the calling thread (the runtime API,
// NCCL). A thread that had another context current gets it back after f.
// f must not unlock the OS thread. Errors wrap gpu.ErrClosed after Close;
// otherwise OnContext returns f's error or the driver's.
func (d *Device) OnContext(f func() error) error {
	if f == nil {
		return badArgf("on context: nil function")
	}
	if d == nil || d.isClosed() {
		return closedf("on context: device closed")
	}
	return onContext(d.api, d.ctx, f)
}

// RawStream is a non-blocking CUDA stream in the device's primary context
// for work enqueued by an external library: Handle is the CUstream, which
// the runtime API takes as a cudaStream_t. It is not a gpu.Queue: nothing
// of choreo issues on it and no lease guards what its work names (see
// DevicePointer). Synchronize waits for the work enqueued so far, bounded
// by a context. Destroy is idempotent; after it the other methods return
// errors wrapping gpu.ErrClosed and Handle returns 0. Destroy raw streams
// before closing their Device. Methods are safe for concurrent use.
type RawStream struct {
	dev *Device

	mu     sync.RWMutex // held for reading by every use of s, for writing by Destroy
	s      cuStream
	closed bool
}

// NewRawStream creates a non-blocking stream (CU_STREAM_NON_BLOCKING: it
// does not synchronize with the legacy default stream).
func (d *Device) NewRawStream() (*RawStream, error) {
	if d == nil || d.isClosed() {
		return nil, closedf("new raw stream: device closed")
	}
	a := d.api
	s, err := call(d.main, func() (cuStream, error) {
		var s cuStream
		return s, a.errorf("cuStreamCreate", a.cuStreamCreate(&s, streamNonBlocking))
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: new raw stream: %w", err)
	}
	return &RawStream{dev: d, s: s}, nil
}

// Handle is the CUstream (a cudaStream_t for the runtime API); 0 once
// destroyed.
func (r *RawStream) Handle() uintptr {
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return 0
	}
	return uintptr(r.s)
}

// use runs f with the stream and the context current, unless the stream or
// its device is closed.
func (r *RawStream) use(op string, f func(a *api, s cuStream) error) error {
	if r == nil || r.dev == nil {
		return badArgf("raw stream: %s: nil stream", op)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return closedf("raw stream: %s: stream destroyed", op)
	}
	d := r.dev
	if d.isClosed() {
		return closedf("raw stream: %s: device closed", op)
	}
	return onContext(d.api, d.ctx, func() error { return f(d.api, r.s) })
}

// Query reports whether all work enqueued on the stream so far has
// completed; a failed stream (a kernel fault, a sticky context error)
// returns the driver's error.
func (r *RawStream) Query() (bool, error) {
	var done bool
	err := r.use("query", func(a *api, s cuStream) error {
		switch res := a.cuStreamQuery(s); res {
		case cudaSuccess:
			done = true
			return nil
		case cudaNotReady:
			return nil
		default:
			return streamFailed(a.errorf("cuStreamQuery", res))
		}
	})
	return done, err
}

// rawSync is how Synchronize polls: a short spin, then sleeps doubling up
// to 1 ms (the stream's work is another library's, often long).
var rawSync = spin.Policy{Spin: 50 * time.Microsecond, Sleep: 2 * time.Microsecond, MaxSleep: time.Millisecond}

// Synchronize waits until the work enqueued on the stream so far has
// completed. It polls cuStreamQuery on rawSync instead of blocking in
// cuStreamSynchronize, so it returns when ctx is done (with an error
// wrapping ctx.Err()) even if the work never completes, and it never holds
// up Destroy for longer than one query.
func (r *RawStream) Synchronize(ctx context.Context) error {
	if ctx == nil {
		return badArgf("raw stream: synchronize: nil context")
	}
	start := time.Now()
	return rawSync.Wait(ctx, nil,
		func() (bool, error) {
			done, err := r.Query()
			if err != nil {
				return false, fmt.Errorf("cuda: raw stream: synchronize: %w", err)
			}
			return done, nil
		},
		func(bool) error {
			return fmt.Errorf("cuda: raw stream: synchronize: work still running after %v: %w", time.Since(start).Round(time.Microsecond), ctx.Err())
		})
}

// CopyAsync enqueues a copy of n bytes from src to dst (unified addresses,
// device or host-mapped, as DevicePointer gives them) on the stream.
func (r *RawStream) CopyAsync(dst, src uintptr, n int) error {
	switch {
	case n < 0:
		return badArgf("raw stream: copy: negative size %d", n)
	case n == 0:
		return nil
	case dst == 0 || src == 0:
		return badArgf("raw stream: copy: null address (dst %#x, src %#x)", dst, src)
	}
	return r.use("copy", func(a *api, s cuStream) error {
		return a.errorf("cuMemcpyAsync", a.cuMemcpyAsync(dst, src, uint64(n), s))
	})
}

// Destroy destroys the stream (work already enqueued still completes; the
// driver releases the stream afterwards). Idempotent. After the Device was
// closed it only marks the stream destroyed: the context went with it.
func (r *RawStream) Destroy() error {
	if r == nil || r.dev == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	d := r.dev
	if d.isClosed() {
		return nil
	}
	if err := onContext(d.api, d.ctx, func() error {
		return d.api.errorf("cuStreamDestroy_v2", d.api.cuStreamDestroy(r.s))
	}); err != nil {
		return fmt.Errorf("cuda: raw stream: destroy: %w", err)
	}
	return nil
}
