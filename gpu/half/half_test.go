package half

import (
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
