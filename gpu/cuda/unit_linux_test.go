//go:build linux

package cuda

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
)

func TestFillBits(t *testing.T) {
	cases := []struct {
		dt   gpu.DType
		v    gpu.Scalar
		want uint64
	}{
		{gpu.Float32, gpu.Float(1.5), uint64(math.Float32bits(1.5))},
		{gpu.Float64, gpu.Int(-3), math.Float64bits(-3)},
		{gpu.Float16, gpu.Float(0.1), uint64(half.F16(0.1))},
		{gpu.BFloat16, gpu.Float(-2.5), uint64(half.BF16(-2.5))},
		{gpu.Int8, gpu.Int(300), uint64(300)},           // the kernel keeps the low byte: 44
		{gpu.Int32, gpu.Float(-7.9), uint64(1<<64 - 7)}, // truncated toward zero
		{gpu.Uint8, gpu.Float(math.NaN()), 0},
	}
	for _, c := range cases {
		if got := fillBits(c.dt, c.v); got != c.want {
			t.Errorf("fillBits(%v, %v) = %#x, want %#x", c.dt, c.v, got, c.want)
		}
	}
}

func TestReachedIsCyclic(t *testing.T) {
	if !reached(5, 5) || !reached(6, 5) || reached(4, 5) {
		t.Error("reached: plain order wrong")
	}
	if !reached(2, math.MaxUint32) || reached(math.MaxUint32, 2) {
		t.Error("reached: wrap-around wrong")
	}
}

func TestLeaseDefersRelease(t *testing.T) {
	released := 0
	l := lease{release: func() { released++ }}
	if !l.acquire() || !l.acquire() {
		t.Fatal("acquire on a live lease failed")
	}
	if !l.free() || l.free() {
		t.Fatal("free: want true once, then false")
	}
	if l.acquire() {
		t.Error("acquire after free succeeded")
	}
	l.drop()
	if released != 0 {
		t.Fatal("released while a reference remained")
	}
	l.drop()
	if released != 1 {
		t.Fatalf("released %d times after the last drop, want 1", released)
	}
	l2 := lease{release: func() { released++ }}
	l2.free()
	if released != 2 {
		t.Errorf("free without references did not release at once")
	}
}

func TestEmbeddedPTXOrClearError(t *testing.T) {
	ptx, err := embeddedPTX()
	if err != nil {
		if !errors.Is(err, ErrNoKernels) || !errors.Is(err, gpu.ErrNoBackend) {
			t.Fatalf("missing PTX error %v does not wrap ErrNoKernels and ErrNoBackend", err)
		}
		t.Logf("no PTX in this build: %v", err)
		return
	}
	if ptx[len(ptx)-1] != 0 || !strings.Contains(string(ptx), ".entry choreo_fill_f32") {
		t.Errorf("embedded PTX is not NUL-terminated or lacks choreo_fill_f32")
	}
}

func TestTruncSat(t *testing.T) {
	cases := []struct {
		f    float64
		want int64
	}{
		{2.9, 2}, {-2.9, -2}, {math.NaN(), 0}, {1e300, math.MaxInt64}, {-1e300, math.MinInt64},
		{math.Inf(1), math.MaxInt64}, {9223372036854775807.0, math.MaxInt64}, {-9223372036854775808.0, math.MinInt64},
	}
	for _, c := range cases {
		if got := truncSat(c.f); got != c.want {
			t.Errorf("truncSat(%v) = %d, want %d", c.f, got, c.want)
		}
	}
}
