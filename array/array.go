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
}

// checkShape validates a shape and returns its element count.
func checkShape(op string, shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("array: %s: negative dimension in shape %v: %w", op, shape, ErrShape)
		}
		if d != 0 && n > math.MaxInt32*64/d {
			return 0, fmt.Errorf("array: %s: shape %v too large: %w", op, shape, ErrShape)
		}
		n *= d
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
	return &Array{shape: slices.Clone(shape), dtype: dt, size: n, mem: newMemory(buf), buf: buf, stream: s}, nil
}

// Wrap makes an array over existing memory, such as a donated input's
// (R16: the output takes over the input's buffer), ready once ev completes.
func Wrap(s *streams.GPU, shape []int, dt DType, mem *Memory, ev streams.Event) (*Array, error) {
	n, err := checkShape("wrap", shape)
	if err != nil {
		return nil, err
	}
	if mem == nil || mem.buf.Len() < n*dt.Size() {
		return nil, fmt.Errorf("array: wrap: memory too small for %v %s: %w", shape, dt, gpu.ErrBadArgument)
	}
	a := &Array{shape: slices.Clone(shape), dtype: dt, size: n, mem: mem, buf: mem.buf, stream: s}
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
// fails (R11).
func (a *Array) Fail(err error) {
	if err == nil {
		return
	}
	if !errors.Is(err, ErrFailed) {
		err = fmt.Errorf("%w: %w", ErrFailed, err)
	}
	a.err.CompareAndSwap(nil, &err)
}

// Err is the array's sticky error, or nil.
func (a *Array) Err() error {
	if p := a.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Wait blocks until the array is ready, bounded by ctx, and returns the
// producer's error if it failed.
func (a *Array) Wait(ctx context.Context) error {
	if err := a.Err(); err != nil {
		return err
	}
	if err := a.Event().Wait(ctx); err != nil {
		if e := a.Err(); e != nil {
			return e
		}
		return fmt.Errorf("array: wait: %w", err)
	}
	return a.Err()
}

// Free gives the array's memory back once every command enqueued so far on
// its stream has completed, without waiting for the collector. Neither the
// array nor an array sharing its memory may be used afterwards.
func (a *Array) Free() error {
	if a.mem.freed.Swap(true) {
		return nil
	}
	if a.stream == nil {
		return a.buf.Free()
	}
	if _, err := a.stream.Enqueue(nil, func(error) { _ = a.buf.Free() }); err != nil {
		return fmt.Errorf("array: free: %w", err)
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
