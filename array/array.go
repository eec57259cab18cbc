package array

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// Array is an n-dimensional array on a device. It is ready once its Event
// has completed; if its producer failed it carries that error for good (the
// first Fail wins) and every synchronisation on it returns the error. An
// Array's shape, dtype and buffer never change; it is safe for concurrent
// use. Arrays made by ops live on the stream that produced them.
type Array struct {
	shape  []int
	dtype  DType
	size   int
	mem    *Memory
	buf    gpu.Buffer // mem.buf
	stream *streams.GPU
	ev     atomic.Pointer[streams.Event]
	err    atomic.Pointer[error]
	failed chan struct{} // closed by the first Fail, so waiters wake at once
}

func newArray(s *streams.GPU, shape []int, dt DType, n int, mem *Memory) *Array {
	return &Array{shape: slices.Clone(shape), dtype: dt, size: n, mem: mem, buf: mem.Buffer(), stream: s,
		failed: make(chan struct{})}
}

// maxElements bounds an array's element count, so that no byte count or
// offset derived from it can overflow.
const maxElements = math.MaxInt32 * 64

// checkShape validates a shape and returns its element count.
func checkShape(op string, shape []int) (int, error) {
	n, over := 1, false
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("array: %s: negative dimension in shape %v: %w", op, shape, ErrShape)
		}
		if d != 0 && n > maxElements/d {
			over = true
		}
		n *= d
	}
	if slices.Contains(shape, 0) {
		return 0, nil // no elements, however large the other dimensions
	}
	if over {
		return 0, fmt.Errorf("array: %s: shape %v has more than %d elements: %w", op, shape, maxElements, ErrTooLarge)
	}
	return n, nil
}

// New allocates an array on s's device whose contents are undefined until
// something writes them; it is ready at once (no producer). Choreographies
// use it for outputs and then set the producer with SetEvent.
func New(s *streams.GPU, shape []int, dt DType) (*Array, error) {
	return alloc("new", s, shape, dt)
}

func alloc(op string, s *streams.GPU, shape []int, dt DType) (*Array, error) {
	if s == nil {
		return nil, fmt.Errorf("array: %s: nil stream: %w", op, gpu.ErrBadArgument)
	}
	if !dt.Valid() {
		return nil, fmt.Errorf("array: %s: invalid dtype %v: %w", op, dt, ErrDType)
	}
	n, err := checkShape(op, shape)
	if err != nil {
		return nil, err
	}
	buf, err := s.Device().Alloc(n*dt.Size(), gpu.DeviceMem)
	if err != nil {
		return nil, fmt.Errorf("array: %s: %w", op, err)
	}
	return newArray(s, shape, dt, n, newMemory(buf)), nil
}

// Wrap makes an array over existing memory, such as a donated input's
// (the output takes over the input's buffer), ready once ev completes.
// s is the stream the array lives on (its reads are staged there).
func Wrap(s *streams.GPU, shape []int, dt DType, mem *Memory, ev streams.Event) (*Array, error) {
	if s == nil {
		return nil, fmt.Errorf("array: wrap: nil stream: %w", gpu.ErrBadArgument)
	}
	if !dt.Valid() {
		return nil, fmt.Errorf("array: wrap: invalid dtype %v: %w", dt, ErrDType)
	}
	n, err := checkShape("wrap", shape)
	if err != nil {
		return nil, err
	}
	if mem == nil || mem.Buffer().Len() < n*dt.Size() {
		return nil, fmt.Errorf("array: wrap: memory too small for %v %s: %w", shape, dt, gpu.ErrBadArgument)
	}
	if mem.Freed() {
		return nil, fmt.Errorf("array: wrap: %w", ErrFreed)
	}
	a := newArray(s, shape, dt, n, mem)
	a.SetEvent(ev)
	return a, nil
}

// Shape returns a copy of the array's shape.
func (a *Array) Shape() []int { return slices.Clone(a.shape) }

// DType is the element type.
func (a *Array) DType() DType { return a.dtype }

// Size is the number of elements.
func (a *Array) Size() int { return a.size }

// NBytes is the size of the contents in bytes.
func (a *Array) NBytes() int { return a.size * a.dtype.Size() }

// Buffer is the device memory holding the contents.
func (a *Array) Buffer() gpu.Buffer { return a.buf }

// Memory is the array's buffer with its lifetime: hold it (not the array)
// to keep the buffer valid without keeping the array alive.
func (a *Array) Memory() *Memory { return a.mem }

// Stream is the stream the array was made on.
func (a *Array) Stream() *streams.GPU { return a.stream }

// Event is the array's readiness: the point on its stream after which its
// contents are written. The zero Event means ready.
func (a *Array) Event() streams.Event {
	if p := a.ev.Load(); p != nil {
		return *p
	}
	return streams.Event{}
}

// SetEvent sets the array's producer. Choreographies call it before they
// hand the array to anyone else.
func (a *Array) SetEvent(ev streams.Event) { a.ev.Store(&ev) }

// Ready reports whether the array's contents are complete (or it failed).
func (a *Array) Ready() bool { return a.Err() != nil || a.Event().Done() }

// Fail marks the array failed with err (wrapped in ErrFailed); only the
// first call counts. Fences call it when the collective producing the array
// fails, so the next Wait or read returns the collective's error.
func (a *Array) Fail(err error) {
	if err == nil {
		return
	}
	if !errors.Is(err, ErrFailed) {
		err = fmt.Errorf("%w: %w", ErrFailed, err)
	}
	if a.err.CompareAndSwap(nil, &err) {
		close(a.failed)
	}
}

// Err is the array's sticky error, or nil.
func (a *Array) Err() error {
	if p := a.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Wait blocks until the array is ready, bounded by ctx, and returns the
// producer's error if it failed; a failure wakes it at once, even while
// the stream is still busy with earlier work.
func (a *Array) Wait(ctx context.Context) error {
	if err := a.Err(); err != nil {
		return err
	}
	if err := a.Event().WaitUntil(ctx, a.failed); err != nil {
		if e := a.Err(); e != nil {
			return e
		}
		return fmt.Errorf("array: wait: %w", err)
	}
	return a.Err()
}

// Free gives the array's memory back without waiting for the collector,
// once every command enqueued so far on its stream has completed and every
// reader that was handed the memory (commands on other streams, collectives'
// comm tasks and staging copies) is done with it. Neither the array nor an
// array sharing its memory may be used afterwards: ops and collectives
// refuse it with ErrFreed. Free is idempotent.
func (a *Array) Free() error {
	m := a.mem
	if m.Freed() {
		return nil
	}
	// Hold a reader's share until the stream has passed what is queued
	// there, so that raw commands enqueued on it keep the buffer too.
	if err := m.Retain(); err != nil {
		return nil // freed concurrently
	}
	m.st.letGo()
	if _, err := a.stream.Enqueue(nil, func(error) { m.Release() }); err != nil {
		m.Release() // a closed stream runs nothing more
		if !errors.Is(err, streams.ErrClosed) {
			return fmt.Errorf("array: free: %w", err)
		}
	}
	return nil
}

func (a *Array) String() string {
	state := "pending"
	if err := a.Err(); err != nil {
		state = "failed"
	} else if a.Event().Done() {
		state = "ready"
	}
	return fmt.Sprintf("array(%v %s, %s)", a.shape, a.dtype, state)
}
