package array_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// Regression tests for defects found by using the API as a user would;
// each failed before its fix.

// D3: a read that gives up waiting (its context ends while the staging
// copy is queued) fails nothing else: not the copy, not the arrays
// enqueued with it.
func TestReadTimeoutFailsNothingElse(t *testing.T) {
	s := stream(t)
	release := testenv.Hold(t, s)
	x, _ := array.Full(s, []int{64}, array.Float32, 3)
	short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := array.ToSlice[float32](short, x); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read under a short deadline: %v", err)
	}
	var others []*array.Array
	for i := range 100 {
		a, err := array.Full(s, []int{16}, array.Float32, float64(i))
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, a)
	}
	release()
	for i, a := range others {
		v, err := array.ToSlice[float32](ctx(t), a)
		if err != nil || v[0] != float32(i) {
			t.Fatalf("unrelated array %d: %v %v", i, v, err)
		}
	}
	if v, err := array.ToSlice[float32](ctx(t), x); err != nil || v[0] != 3 {
		t.Fatalf("the read itself, again: %v %v", v, err)
	}
}

// D5: nil streams and arrays are errors, never panics.
func TestNilStreamsAreErrors(t *testing.T) {
	s := stream(t)
	x, _ := array.Full(s, []int{4}, array.Float32, 1)
	for name, f := range map[string]func() error{
		"add":   func() error { _, err := array.Add(nil, x, x); return err },
		"scale": func() error { _, err := array.Scale(nil, x, 2); return err },
		"copy":  func() error { _, err := array.Copy(nil, x); return err },
		"wrap": func() error {
			_, err := array.Wrap(nil, []int{4}, array.Float32, x.Memory(), streams.Event{})
			return err
		},
		"full": func() error { _, err := array.Full(nil, []int{4}, array.Float32, 1); return err },
	} {
		if err := f(); !errors.Is(err, gpu.ErrBadArgument) {
			t.Errorf("%s with a nil stream: %v, want ErrBadArgument", name, err)
		}
	}
}

// D8: an invalid dtype is refused where the array is made, before anything
// sized by it is allocated.
func TestWrapRefusesInvalidDType(t *testing.T) {
	s := stream(t)
	x, _ := array.Full(s, []int{4}, array.Float32, 1)
	for _, dt := range []array.DType{gpu.Invalid, gpu.DType(200)} {
		if _, err := array.Wrap(s, []int{1 << 40}, dt, x.Memory(), streams.Event{}); !errors.Is(err, array.ErrDType) {
			t.Errorf("wrap as %v: %v, want ErrDType", dt, err)
		}
	}
}

// Shapes: zero elements are fine however large the other dimensions; too
// many elements say so (ErrTooLarge), not "shape mismatch".
func TestShapeLimits(t *testing.T) {
	s := stream(t)
	z, err := array.Full(s, []int{1 << 62, 0}, array.Float32, 1)
	if err != nil || z.Size() != 0 {
		t.Fatalf("[1<<62, 0]: %v %v", z, err)
	}
	_, err = array.Full(s, []int{1 << 40, 1 << 40}, array.Float32, 1)
	if !errors.Is(err, array.ErrTooLarge) || errors.Is(err, array.ErrShape) {
		t.Fatalf("huge shape: %v, want ErrTooLarge only", err)
	}
	if _, err := array.Full(s, []int{-1}, array.Float32, 1); !errors.Is(err, array.ErrShape) {
		t.Fatalf("negative dimension: %v, want ErrShape", err)
	}
}

// D1 for ops: freeing an input while an op on another stream still reads
// it keeps the memory until that op has run.
func TestFreeWhileAnotherStreamReads(t *testing.T) {
	dev, rt := testenv.Device(t), testenv.Runtime(t)
	s := testenv.Stream(t, rt, dev)
	s2 := testenv.Stream(t, rt, dev)
	x, _ := array.Full(s, []int{1 << 14}, array.Float32, 1)
	if err := x.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
	release := testenv.Hold(t, s2)
	y, err := array.Scale(s2, x, 2) // queued on s2 behind the hold
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Free(); err != nil {
		t.Fatal(err)
	}
	z, _ := array.Full(s, []int{1 << 14}, array.Float32, 9) // would take x's block
	if err := z.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
	release()
	v, err := array.ToSlice[float32](ctx(t), y)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range v {
		if e != 2 {
			t.Fatalf("element %d = %v, want 2", i, e)
		}
	}
}
