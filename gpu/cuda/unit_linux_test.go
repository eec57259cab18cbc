//go:build linux

package cuda

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

func TestReachedCyclic(t *testing.T) {
	if !reachedCyclic(5, 5) || !reachedCyclic(6, 5) || reachedCyclic(4, 5) {
		t.Error("reachedCyclic: plain order wrong")
	}
	if !reachedCyclic(2, math.MaxUint32) || reachedCyclic(math.MaxUint32, 2) {
		t.Error("reachedCyclic: wrap-around wrong")
	}
}

func TestWatchSpinSpinsThenSleeps(t *testing.T) {
	b := watchSpin.Backoff()
	start := time.Now()
	for b.Next() == 0 {
		if time.Since(start) > time.Second {
			t.Fatal("backoff still spinning after 1s")
		}
	}
	prev := watchSpin.Sleep
	for range 20 {
		d := b.Next()
		if d < prev || d > watchSpin.MaxSleep {
			t.Fatalf("sleep %v after %v: want doubling up to %v", d, prev, watchSpin.MaxSleep)
		}
		prev = d
	}
	if prev != watchSpin.MaxSleep {
		t.Errorf("sleep settled at %v, want %v", prev, watchSpin.MaxSleep)
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

func TestSizeClass(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 4096}, {4096, 4096}, {4097, 8192}, {carveMax, carveMax}, {carveMax + 1, 2 * carveMax}} {
		if got := sizeClass(c.n); got != c.want {
			t.Errorf("sizeClass(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}
