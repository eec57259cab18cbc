package algo_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// opaque hides PeerAccess, so the algorithms take the message path.
type opaque struct{ transport.Transport }

func local(n int, plain bool) []transport.Transport {
	ts := transport.NewLocal(n)
	if plain {
		for i := range ts {
			ts[i] = opaque{ts[i]}
		}
	}
	return ts
}

const (
	opTimeout = 60 * time.Second // deadline of a collective expected to succeed (a large one takes 5-6 s under -race on 2 cores, alone)
	slack     = 5 * time.Second  // extra time the harness waits past it
)

// onRanks runs fn on every rank at once, each with a context bounded by
// timeout, and returns their errors; it fails the test if a rank does not
// return within timeout+slack (a hang).
func onRanks(t testing.TB, ts []transport.Transport, timeout time.Duration, fn func(ctx context.Context, r int, tr transport.Transport) error) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errs := make([]error, len(ts))
	done := make(chan int, len(ts))
	for r, tr := range ts {
		go func() {
			errs[r] = fn(ctx, r, tr)
			done <- r
		}()
	}
	bound := time.After(timeout + slack)
	for range ts {
		select {
		case <-done:
		case <-bound:
			t.Fatalf("ranks did not return within %v", timeout+slack)
		}
	}
	return errs
}

func noErrors(t testing.TB, what string, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("%s: rank %d: %v", what, r, err)
		}
	}
}

// gen fills count elements of dt for rank r with values suited to op: sums
// of positive floats (no cancellation, so relative tolerances are
// meaningful), products near 1, any values for min/max; integers over their
// whole range (sums and products wrap).
func gen(dt gpu.DType, op reduce.Op, count, r int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, uint64(r)*7919+uint64(dt)*31+uint64(op)))
	buf := make([]byte, count*dt.Size())
	for i := 0; i < count; i++ {
		if dt.IsFloat() {
			var v float64
			switch op {
			case reduce.Prod:
				v = 0.9 + 0.2*rng.Float64()
			case reduce.Sum:
				v = 0.5 + rng.Float64()
			default:
				v = rng.Float64()*200 - 100
			}
			dt.SetFloat(buf, i, v)
		} else {
			dt.SetInt(buf, i, int64(rng.Uint64()))
		}
	}
	return buf
}

// ref is an expected result: exact integer elements, or float64 values.
type ref struct {
	ints   []byte
	floats []float64
}

// reference reduces inputs elementwise: floats in float64, integers exactly
// with two's-complement wrap (computed in 64 bits, truncated by SetInt).
func reference(dt gpu.DType, op reduce.Op, inputs [][]byte, count int) ref {
	out := ref{ints: make([]byte, count*dt.Size()), floats: make([]float64, count)}
	for i := 0; i < count; i++ {
		if dt.IsFloat() {
			acc := dt.Float(inputs[0], i)
			for _, in := range inputs[1:] {
				v := dt.Float(in, i)
				switch op {
				case reduce.Sum:
					acc += v
				case reduce.Prod:
					acc *= v
				case reduce.Min:
					acc = math.Min(acc, v)
				case reduce.Max:
					acc = math.Max(acc, v)
				}
			}
			out.floats[i] = acc
			continue
		}
		acc := dt.Int(inputs[0], i)
		for _, in := range inputs[1:] {
			v := dt.Int(in, i)
			switch op {
			case reduce.Sum:
				acc = int64(uint64(acc) + uint64(v))
			case reduce.Prod:
				acc = int64(uint64(acc) * uint64(v))
			case reduce.Min:
				acc = min(acc, v)
			case reduce.Max:
				acc = max(acc, v)
			}
		}
		dt.SetInt(out.ints, i, acc)
	}
	return out
}

// slice is the reference's elements [lo, hi).
func (r ref) slice(dt gpu.DType, lo, hi int) ref {
	return ref{ints: r.ints[lo*dt.Size() : hi*dt.Size()], floats: r.floats[lo:hi]}
}

func tolerance(dt gpu.DType) float64 {
	switch dt {
	case gpu.Float16:
		return 5e-3
	case gpu.BFloat16:
		return 1e-1
	}
	return 1e-6
}

// check compares got with want.
func check(dt gpu.DType, got []byte, want ref) error {
	for i := range want.floats {
		if dt.IsFloat() {
			g, w := dt.Float(got, i), want.floats[i]
			if math.Abs(g-w) > tolerance(dt)*math.Abs(w)+1e-300 {
				return fmt.Errorf("element %d: got %v, want %v (rel tol %v)", i, g, w, tolerance(dt))
			}
		} else if g, w := dt.Int(got, i), dt.Int(want.ints, i); g != w {
			return fmt.Errorf("element %d: got %d, want %d", i, g, w)
		}
	}
	return nil
}
