package array

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
)

// HostBytes waits for a (bounded by ctx) and returns its contents as bytes
// the CPU can read: the buffer itself where the CPU sees device memory, or a
// copy staged through pinned host memory on a's stream. On host-visible
// backends the slice aliases the array: it must not be written, and it is
// valid only while a is reachable (keep a alive with runtime.KeepAlive
// until you are done with the bytes: a collected array's memory is reused).
func HostBytes(ctx context.Context, a *Array) ([]byte, error) {
	if a == nil {
		return nil, fmt.Errorf("array: read: nil array: %w", gpu.ErrBadArgument)
	}
	if err := a.Wait(ctx); err != nil {
		return nil, err
	}
	nb := a.NBytes()
	if b := a.buf.Bytes(); b != nil {
		return b[:nb], nil
	}
	if nb == 0 {
		return nil, nil
	}
	// The copy owns its two buffers until it has run: a caller that gives
	// up waiting (ctx) must not free what a queued command still names.
	if err := a.mem.Retain(); err != nil {
		return nil, fmt.Errorf("array: read: %w", err)
	}
	host, err := a.stream.Device().Alloc(nb, gpu.HostMem)
	if err != nil {
		a.mem.Release()
		return nil, fmt.Errorf("array: read: staging: %w", err)
	}
	copied := make(chan error, 1)
	var out []byte
	ev, err := a.stream.Enqueue([]gpu.Command{gpu.Copy{Dst: host, Src: a.buf, Bytes: nb}}, func(err error) {
		if err == nil {
			out = append([]byte(nil), host.Bytes()[:nb]...)
		}
		_ = host.Free()
		a.mem.Release()
		copied <- err
	})
	if err != nil {
		_ = host.Free()
		a.mem.Release()
		return nil, fmt.Errorf("array: read: %w", err)
	}
	if err := ev.Wait(ctx); err != nil {
		return nil, fmt.Errorf("array: read: %w", err)
	}
	if err := <-copied; err != nil { // the callback has run: the event is done
		return nil, fmt.Errorf("array: read: %w", err)
	}
	return out, nil
}

// ToSlice waits for a (bounded by ctx) and returns a copy of its elements.
// T must be the Go type of a's dtype (see Element). If a's producer failed,
// it returns that error and no data, never wrong data.
func ToSlice[T Element](ctx context.Context, a *Array) ([]T, error) {
	if a == nil {
		return nil, fmt.Errorf("array: to_slice: nil array: %w", gpu.ErrBadArgument)
	}
	if want := DTypeOf[T](); want != a.dtype {
		return nil, fmt.Errorf("array: to_slice: array is %s, asked for %s: %w", a.dtype, want, ErrDType)
	}
	b, err := HostBytes(ctx, a)
	if err != nil {
		return nil, err
	}
	out := make([]T, a.size)
	if len(out) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
	}
	// The contents could have been failed while we copied (a late release):
	// never hand out data of a failed array.
	if err := a.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ToFloat64 waits for a and returns its elements widened to float64,
// whatever its dtype; handy for checks and printing.
func ToFloat64(ctx context.Context, a *Array) ([]float64, error) {
	if a == nil {
		return nil, fmt.Errorf("array: to_float64: nil array: %w", gpu.ErrBadArgument)
	}
	b, err := HostBytes(ctx, a)
	if err != nil {
		return nil, err
	}
	out := make([]float64, a.size)
	if err := Decode(a.dtype, b, out); err != nil {
		return nil, err
	}
	if err := a.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Decode widens the little-endian elements of dtype dt in b into out.
func Decode(dt DType, b []byte, out []float64) error {
	if len(b) < len(out)*dt.Size() {
		return fmt.Errorf("array: decode: %d bytes for %d %s: %w", len(b), len(out), dt, gpu.ErrBadArgument)
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	n := len(out)
	switch dt {
	case Float32:
		for i, v := range unsafe.Slice((*float32)(p), n) {
			out[i] = float64(v)
		}
	case Float64:
		copy(out, unsafe.Slice((*float64)(p), n))
	case Float16:
		for i, v := range unsafe.Slice((*half.Float16)(p), n) {
			out[i] = float64(v.Float32())
		}
	case BFloat16:
		for i, v := range unsafe.Slice((*half.BFloat16)(p), n) {
			out[i] = float64(v.Float32())
		}
	case Int8:
		for i, v := range unsafe.Slice((*int8)(p), n) {
			out[i] = float64(v)
		}
	case Int16:
		for i, v := range unsafe.Slice((*int16)(p), n) {
			out[i] = float64(v)
		}
	case Int32:
		for i, v := range unsafe.Slice((*int32)(p), n) {
			out[i] = float64(v)
		}
	case Int64:
		for i, v := range unsafe.Slice((*int64)(p), n) {
			out[i] = float64(v)
		}
	case Uint8:
		for i, v := range unsafe.Slice((*uint8)(p), n) {
			out[i] = float64(v)
		}
	default:
		return fmt.Errorf("array: decode: %v: %w", dt, ErrDType)
	}
	return nil
}
