package half

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestFloat16RoundTrip(t *testing.T) {
	for _, f := range []float32{0, 1, -2.5, 65504, 1.0 / 3, 6.1e-5} {
		got := F16(f).Float32()
		if d := math.Abs(float64(got - f)); d > math.Abs(float64(f))*1e-3+1e-7 {
			t.Errorf("F16(%v) -> %v", f, got)
		}
	}
	if F16(1).Float32() != 1 || F16(-3).Float32() != -3 {
		t.Fatal("small integers must be exact")
	}
	if !math.IsInf(float64(F16(1e6).Float32()), 1) {
		t.Fatal("overflow must give +Inf")
	}
}

func TestBFloat16Rounding(t *testing.T) {
	cases := []struct {
		in   float32
		want float32
	}{
		{1, 1},
		{-2, -2},
		{1 + 1.0/256, 1},           // exactly half way: ties to even (down)
		{1 + 3.0/256, 1 + 4.0/256}, // half way, odd below: rounds up
		{1 + 1.0/256 + 1e-6, 1 + 2.0/256},
	}
	for _, c := range cases {
		if got := BF16(c.in).Float32(); got != c.want {
			t.Errorf("BF16(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	nan := float32(math.NaN())
	if g := BF16(nan).Float32(); g == g {
		t.Fatal("NaN must stay NaN")
	}
}

func TestSlicesMatchElements(t *testing.T) {
	b := make([]byte, 2<<16)
	for i := range 1 << 16 {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(i))
	}
	f16, bf16 := make([]float32, 1<<16), make([]float32, 1<<16)
	WidenFloat16(f16, b)
	WidenBFloat16(bf16, b)
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }
	for i := range 1 << 16 {
		if !same(f16[i], Float16(i).Float32()) || !same(bf16[i], BFloat16(i).Float32()) {
			t.Fatalf("widening %#04x differs from the element conversion", i)
		}
	}
	out := make([]byte, len(b))
	for _, fs := range [][]float32{f16, bf16} {
		NarrowFloat16(out, fs)
		for i, v := range fs {
			if binary.LittleEndian.Uint16(out[2*i:]) != uint16(F16(v)) {
				t.Fatalf("NarrowFloat16(%v) differs from F16", v)
			}
		}
		NarrowBFloat16(out, fs)
		for i, v := range fs {
			if binary.LittleEndian.Uint16(out[2*i:]) != uint16(BF16(v)) {
				t.Fatalf("NarrowBFloat16(%v) differs from BF16", v)
			}
		}
	}
}
