package collectives_test

import (
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/trace"
)

// benchAllReduce4KiB times a 4-rank, 4 KiB (1024 x float32) all-reduce,
// every rank's output waited for, on a world made with opts.
func benchAllReduce4KiB(b *testing.B, opts ...collectives.Option) {
	const n = 4
	w := newWorld(b, n, opts...)
	xs := make([]*array.Array, n)
	ctx := testenv.Ctx(b, 10*time.Minute)
	for r := range n {
		x, err := array.Full(w.s[r], []int{1024}, gpu.Float32, float64(r))
		if err == nil {
			err = x.Wait(ctx)
		}
		if err != nil {
			b.Fatal(err)
		}
		xs[r] = x
	}
	ys := make([]*array.Array, n)
	b.ReportAllocs()
	for b.Loop() {
		for r := range n {
			y, err := w.groups[r].AllReduce(w.s[r], xs[r], collectives.Sum)
			if err != nil {
				b.Fatal(err)
			}
			ys[r] = y
		}
		for _, y := range ys {
			if err := y.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			_ = y.Free()
		}
	}
}

// BenchmarkAllReduce4KiB: tracing off (the default) and on.
func BenchmarkAllReduce4KiB(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchAllReduce4KiB(b) })
	b.Run("on", func(b *testing.B) { benchAllReduce4KiB(b, collectives.WithTracer(trace.New())) })
}
