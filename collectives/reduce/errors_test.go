package reduce

import (
	"bytes"
	"errors"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// TestIntoBadInput: every kind of bad input is an error wrapping the right
// sentinel, never a panic, and dst is left untouched.
func TestIntoBadInput(t *testing.T) {
	buf := make([]byte, 64)
	for i := range buf {
		buf[i] = byte(i)
	}
	cases := []struct {
		name     string
		op       Op
		dt       gpu.DType
		dst, src []byte
		want     error
	}{
		{"op zero", 0, gpu.Float32, make([]byte, 4), make([]byte, 4), ErrBadOp},
		{"op five", 5, gpu.Float32, make([]byte, 4), make([]byte, 4), ErrBadOp},
		{"dtype invalid", Sum, gpu.Invalid, make([]byte, 4), make([]byte, 4), ErrBadArgument},
		{"dtype unknown", Sum, gpu.DType(200), make([]byte, 4), make([]byte, 4), ErrBadArgument},
		{"length mismatch", Sum, gpu.Float32, make([]byte, 12), make([]byte, 16), ErrBadArgument},
		{"not a multiple", Max, gpu.Float64, make([]byte, 12), make([]byte, 12), ErrBadArgument},
		{"odd half", Sum, gpu.BFloat16, make([]byte, 3), make([]byte, 3), ErrBadArgument},
		{"partial overlap", Sum, gpu.Float32, buf[0:32], buf[4:36], ErrBadArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := bytes.Clone(c.dst)
			err := Into(c.op, c.dt, c.dst, c.src)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !bytes.Equal(c.dst, before) {
				t.Error("dst modified on error")
			}
		})
	}
	err := Into(Sum, gpu.Float32, make([]byte, 12), make([]byte, 16))
	if got, want := err.Error(), "reduce: sum float32: dst has 12 bytes, src 16: bad argument"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

// TestManyBadInput: bad input to Many, including dst aliasing a source
// other than srcs[0].
func TestManyBadInput(t *testing.T) {
	a, b := make([]byte, 16), make([]byte, 16)
	buf := make([]byte, 64)
	cases := []struct {
		name string
		op   Op
		dt   gpu.DType
		dst  []byte
		srcs [][]byte
		want error
	}{
		{"op", 9, gpu.Int8, a, [][]byte{b}, ErrBadOp},
		{"dtype", Sum, gpu.Invalid, a, [][]byte{b}, ErrBadArgument},
		{"no sources", Sum, gpu.Int8, a, nil, ErrBadArgument},
		{"length", Sum, gpu.Int8, a, [][]byte{b, make([]byte, 15)}, ErrBadArgument},
		{"multiple", Sum, gpu.Int64, make([]byte, 12), [][]byte{make([]byte, 12)}, ErrBadArgument},
		{"dst is srcs[1]", Sum, gpu.Int32, a, [][]byte{b, a}, ErrBadArgument},
		{"dst partly srcs[0]", Sum, gpu.Int32, buf[0:16], [][]byte{buf[8:24], b}, ErrBadArgument},
		{"dst partly srcs[1]", Sum, gpu.Int32, buf[0:16], [][]byte{b, buf[12:28]}, ErrBadArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Many(c.op, c.dt, c.dst, c.srcs...); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	// Sources may overlap each other and the zero-length case is fine.
	if err := Many(Sum, gpu.Int32, a, b, b, b); err != nil {
		t.Errorf("overlapping sources: %v", err)
	}
	if err := Many(Sum, gpu.Float16, nil, nil, []byte{}); err != nil {
		t.Errorf("empty: %v", err)
	}
}

// TestTypedPanics: the typed fast paths treat a bad op or a length mismatch
// as a programmer error.
func TestTypedPanics(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	mustPanic("f32 op", func() { Float32Into(0, nil, nil) })
	mustPanic("f32 len", func() { Float32Into(Sum, make([]float32, 2), make([]float32, 3)) })
	mustPanic("f64 op", func() { Float64Into(7, nil, nil) })
	mustPanic("f64 len", func() { Float64Into(Sum, make([]float64, 3), make([]float64, 2)) })
}
