package array

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// encode enqueues cmds producing out on s. out's readiness is the commands'
// Event; when they complete, a failed command or a failed input fails out.
// The inputs' memory is retained until the commands have completed, so an
// input freed meanwhile (its own stream may be idle) is not reused under them.
func encode(op string, s *streams.GPU, out *Array, cmds []gpu.Command, inputs ...*Array) (*Array, error) {
	release := func(n int) {
		for _, in := range inputs[:n] {
			in.mem.Release()
		}
	}
	for i, in := range inputs {
		if err := in.mem.Retain(); err != nil {
			release(i)
			return nil, fmt.Errorf("array: %s: input: %w", op, err)
		}
	}
	ev, err := s.Enqueue(cmds, func(err error) {
		defer release(len(inputs))
		if err != nil {
			out.Fail(fmt.Errorf("array: %s: %w", op, err))
			return
		}
		for _, in := range inputs {
			if e := in.Err(); e != nil {
				out.Fail(fmt.Errorf("array: %s: input failed: %w", op, e))
				return
			}
		}
	})
	if err != nil {
		release(len(inputs))
		return nil, fmt.Errorf("array: %s: %w", op, err)
	}
	out.SetEvent(ev)
	return out, nil
}

// checkStream rejects a nil stream.
func checkStream(op string, s *streams.GPU) error {
	if s == nil {
		return fmt.Errorf("array: %s: nil stream: %w", op, gpu.ErrBadArgument)
	}
	return nil
}

// checkInput rejects inputs an op cannot use: nil, failed, or produced on
// another stream and not yet complete.
func checkInput(op string, s *streams.GPU, in *Array) error {
	if in == nil {
		return fmt.Errorf("array: %s: nil input: %w", op, gpu.ErrBadArgument)
	}
	if in.mem.Freed() {
		return fmt.Errorf("array: %s: input %v: %w", op, in, ErrFreed)
	}
	if err := in.Err(); err != nil {
		return fmt.Errorf("array: %s: input %v: %w", op, in, err)
	}
	if ev := in.Event(); ev.Valid() && ev.Stream() != s && !ev.Done() {
		return fmt.Errorf("array: %s: input is produced on %s, not %s, and not complete; wait for it first: %w",
			op, ev.Stream().Name(), s.Name(), gpu.ErrBadArgument)
	}
	if in.buf.Len() > 0 && in.stream != nil && in.stream.Device() != s.Device() {
		return fmt.Errorf("array: %s: input lives on another device: %w", op, gpu.ErrBadArgument)
	}
	return nil
}

// Full returns an array of the given shape with every element v.
func Full(s *streams.GPU, shape []int, dt DType, v float64) (*Array, error) {
	out, err := alloc("full", s, shape, dt)
	if err != nil {
		return nil, err
	}
	return encode("full", s, out, []gpu.Command{gpu.Fill{Dst: out.buf, DType: dt, N: out.size, Value: scalar(dt, v)}})
}

// Arange returns the n elements start, start+step, ... as a 1-D array.
func Arange(s *streams.GPU, n int, dt DType, start, step float64) (*Array, error) {
	out, err := alloc("arange", s, []int{n}, dt)
	if err != nil {
		return nil, err
	}
	return encode("arange", s, out, []gpu.Command{gpu.Arange{Dst: out.buf, DType: dt, N: n,
		Start: scalar(dt, start), Step: scalar(dt, step)}})
}

// FromSlice copies data into a new array of the given shape (1-D if shape
// is empty); the element type picks the dtype. The copy goes through pinned
// host memory and a copy on s, so it works on every backend.
func FromSlice[T Element](s *streams.GPU, data []T, shape ...int) (*Array, error) {
	if len(shape) == 0 {
		shape = []int{len(data)}
	}
	dt := DTypeOf[T]()
	out, err := alloc("from_slice", s, shape, dt)
	if err != nil {
		return nil, err
	}
	if out.size != len(data) {
		return nil, fmt.Errorf("array: from_slice: %d values for shape %v: %w", len(data), shape, ErrShape)
	}
	nb := out.NBytes()
	if nb == 0 {
		return out, nil
	}
	host, err := s.Device().Alloc(nb, gpu.HostMem)
	if err != nil {
		return nil, fmt.Errorf("array: from_slice: staging: %w", err)
	}
	copy(host.Bytes(), unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), nb))
	ev, err := s.Enqueue([]gpu.Command{gpu.Copy{Dst: out.buf, Src: host, Bytes: nb}}, func(err error) {
		_ = host.Free()
		if err != nil {
			out.Fail(fmt.Errorf("array: from_slice: %w", err))
		}
	})
	if err != nil {
		_ = host.Free()
		return nil, fmt.Errorf("array: from_slice: %w", err)
	}
	out.SetEvent(ev)
	return out, nil
}

// Add returns a + b, element by element; shapes and dtypes must match.
func Add(s *streams.GPU, a, b *Array) (*Array, error) {
	if err := checkStream("add", s); err != nil {
		return nil, err
	}
	for _, in := range []*Array{a, b} {
		if err := checkInput("add", s, in); err != nil {
			return nil, err
		}
	}
	if !slices.Equal(a.shape, b.shape) {
		return nil, fmt.Errorf("array: add: shapes %v and %v: %w", a.shape, b.shape, ErrShape)
	}
	if a.dtype != b.dtype {
		return nil, fmt.Errorf("array: add: dtypes %s and %s: %w", a.dtype, b.dtype, ErrDType)
	}
	out, err := alloc("add", s, a.shape, a.dtype)
	if err != nil {
		return nil, err
	}
	return encode("add", s, out, []gpu.Command{gpu.Add{Dst: out.buf, A: a.buf, B: b.buf, DType: a.dtype, N: a.size}}, a, b)
}

// Scale returns a * f, element by element (integer dtypes: truncated toward
// zero unless f is a whole number).
func Scale(s *streams.GPU, a *Array, f float64) (*Array, error) {
	if err := checkStream("scale", s); err != nil {
		return nil, err
	}
	if err := checkInput("scale", s, a); err != nil {
		return nil, err
	}
	out, err := alloc("scale", s, a.shape, a.dtype)
	if err != nil {
		return nil, err
	}
	return encode("scale", s, out, []gpu.Command{gpu.Scale{Dst: out.buf, Src: a.buf, DType: a.dtype, N: a.size,
		Factor: scalar(a.dtype, f)}}, a)
}

// Copy returns a copy of a.
func Copy(s *streams.GPU, a *Array) (*Array, error) {
	if err := checkStream("copy", s); err != nil {
		return nil, err
	}
	if err := checkInput("copy", s, a); err != nil {
		return nil, err
	}
	out, err := alloc("copy", s, a.shape, a.dtype)
	if err != nil {
		return nil, err
	}
	return encode("copy", s, out, []gpu.Command{gpu.Copy{Dst: out.buf, Src: a.buf, Bytes: a.NBytes()}}, a)
}

// scalar makes the gpu.Scalar for v: exact integers for integer dtypes when
// v is whole.
func scalar(dt DType, v float64) gpu.Scalar {
	if !dt.IsFloat() && v == float64(int64(v)) {
		return gpu.Int(int64(v))
	}
	return gpu.Float(v)
}
