package array_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

func stream(t *testing.T) *streams.GPU {
	t.Helper()
	dev := testenv.Device(t)
	rt := testenv.Runtime(t)
	return testenv.Stream(t, rt, dev)
}

func ctx(t *testing.T) context.Context { return testenv.Ctx(t, 10*time.Second) }

func TestFullArangeAddScaleCopy(t *testing.T) {
	s := stream(t)
	x, err := array.Full(s, []int{2, 3}, array.Float32, 1.5)
	if err != nil {
		t.Fatal(err)
	}
	y, err := array.Arange(s, 6, array.Float32, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := array.Add(s, x, y); !errors.Is(err, array.ErrShape) {
		t.Fatalf("add of %v and %v: got %v, want ErrShape", x.Shape(), y.Shape(), err)
	}
	y2, err := array.FromSlice(s, []float32{0, 2, 4, 6, 8, 10}, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	z, err := array.Add(s, x, y2)
	if err != nil {
		t.Fatal(err)
	}
	w, err := array.Scale(s, z, 2)
	if err != nil {
		t.Fatal(err)
	}
	c, err := array.Copy(s, w)
	if err != nil {
		t.Fatal(err)
	}
	got, err := array.ToSlice[float32](ctx(t), c)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{3, 7, 11, 15, 19, 23}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	ar, err := array.ToSlice[float32](ctx(t), y)
	if err != nil || ar[5] != 10 {
		t.Fatalf("arange: %v %v", ar, err)
	}
}

func TestEveryDType(t *testing.T) {
	s := stream(t)
	for _, dt := range gpu.DTypes {
		x, err := array.Arange(s, 7, dt, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		y, err := array.Scale(s, x, 3)
		if err != nil {
			t.Fatal(err)
		}
		z, err := array.Add(s, x, y)
		if err != nil {
			t.Fatal(err)
		}
		got, err := array.ToFloat64(ctx(t), z)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		for i, v := range got {
			if want := float64(4 * (i + 1)); v != want {
				t.Fatalf("%s: element %d = %v, want %v", dt, i, v, want)
			}
		}
	}
	h, err := array.FromSlice(s, []half.BFloat16{half.BF16(1.5), half.BF16(-2)})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := array.ToSlice[half.BFloat16](ctx(t), h)
	if err != nil || hs[0].Float32() != 1.5 || hs[1].Float32() != -2 {
		t.Fatalf("bfloat16 round trip: %v %v", hs, err)
	}
}

func TestBadInput(t *testing.T) {
	s := stream(t)
	if _, err := array.Full(s, []int{-1}, array.Float32, 0); !errors.Is(err, array.ErrShape) {
		t.Fatalf("negative dim: %v", err)
	}
	if _, err := array.Full(nil, []int{1}, array.Float32, 0); !errors.Is(err, gpu.ErrBadArgument) {
		t.Fatalf("nil stream: %v", err)
	}
	if _, err := array.Full(s, []int{1}, array.DType(99), 0); !errors.Is(err, array.ErrDType) {
		t.Fatalf("bad dtype: %v", err)
	}
	a, _ := array.Full(s, []int{3}, array.Float32, 1)
	b, _ := array.Full(s, []int{3}, array.Int32, 1)
	if _, err := array.Add(s, a, b); !errors.Is(err, array.ErrDType) {
		t.Fatalf("dtype mismatch: %v", err)
	}
	if _, err := array.ToSlice[int32](ctx(t), a); !errors.Is(err, array.ErrDType) {
		t.Fatalf("to_slice of wrong type: %v", err)
	}
	if _, err := array.FromSlice(s, []float32{1, 2, 3}, 2, 2); !errors.Is(err, array.ErrShape) {
		t.Fatalf("from_slice size mismatch: %v", err)
	}
	if _, err := array.Add(s, a, nil); !errors.Is(err, gpu.ErrBadArgument) {
		t.Fatalf("nil input: %v", err)
	}
	// A failed array: ops refuse it, reads return its error, never data.
	cause := errors.New("collective exploded")
	a.Fail(cause)
	if _, err := array.Scale(s, a, 2); !errors.Is(err, cause) {
		t.Fatalf("op on failed array: %v", err)
	}
	if _, err := array.ToSlice[float32](ctx(t), a); !errors.Is(err, array.ErrFailed) || !errors.Is(err, cause) {
		t.Fatalf("read of failed array: %v", err)
	}
}

func TestFailurePropagatesToDependents(t *testing.T) {
	s := stream(t)
	a, _ := array.Full(s, []int{4}, array.Float32, 1)
	b, err := array.Scale(s, a, 2) // encoded while a is fine
	if err != nil {
		t.Fatal(err)
	}
	a.Fail(errors.New("late failure"))
	if _, err := array.ToSlice[float32](ctx(t), b); !errors.Is(err, array.ErrFailed) {
		// b's command may have completed before a failed; then b is fine.
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestClosedStream(t *testing.T) {
	s := stream(t)
	if err := s.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := array.Full(s, []int{4}, array.Float32, 1); !errors.Is(err, streams.ErrClosed) {
		t.Fatalf("op on closed stream: %v", err)
	}
}

func TestWaitBoundedByContext(t *testing.T) {
	s := stream(t)
	dev := s.Device()
	w, err := dev.NewFenceWord()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Store(gpu.StopValue)
	if _, err := s.Enqueue([]gpu.Command{gpu.WaitValue{Word: w, Value: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	x, _ := array.Full(s, []int{4}, array.Float32, 1)
	c, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := array.ToSlice[float32](c, x); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked read: %v", err)
	}
	w.Store(1)
	v, err := array.ToSlice[float32](ctx(t), x)
	if err != nil || math.Abs(float64(v[0]-1)) > 0 {
		t.Fatalf("after release: %v %v", v, err)
	}
}

// TestDroppedArraysFreeTheirMemory: an array nothing refers to gives its
// buffer back, and dropping an input right after using it is safe.
func TestDroppedArraysFreeTheirMemory(t *testing.T) {
	s := stream(t)
	x, err := array.Full(s, []int{1 << 16}, array.Float32, 3)
	if err != nil {
		t.Fatal(err)
	}
	y, err := array.Scale(s, x, 2)
	if err != nil {
		t.Fatal(err)
	}
	buf := x.Buffer()
	x = nil
	runtime.GC()
	runtime.GC()
	vals, err := array.ToSlice[float32](ctx(t), y)
	if err != nil || vals[1<<16-1] != 6 {
		t.Fatalf("op on a dropped input: %v %v", err, vals[:1])
	}
	if s.Device().Properties().HostVisibleDeviceMem {
		deadline := time.Now().Add(30 * time.Second)
		for buf.Bytes() != nil && time.Now().Before(deadline) {
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
		if buf.Bytes() != nil {
			t.Fatal("a dropped array's buffer was never freed")
		}
	}
}
