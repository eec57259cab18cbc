package collectives_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// BenchmarkAllReduceLatency: 2 ranks, 1-element float32 all-reduce, end to
// end through the fence and both streams (target <= 10 us per op on sim).
// Beside the p50 it reports the launch: the time of the two AllReduce
// calls, before the waits, which work moved onto the caller shows in even
// where the end to end time hides it (the sim runs everything cheaply).
func BenchmarkAllReduceLatency(b *testing.B) { benchAllReduceLatency(b, 1) }

// BenchmarkAllReduceLatency4KiB is BenchmarkAllReduceLatency at 4 KiB
// (1024 float32) per rank, still on the host path where the device's
// memory is not the CPU's (staged: a copy each way).
func BenchmarkAllReduceLatency4KiB(b *testing.B) { benchAllReduceLatency(b, 1024) }

// benchAllReduceLatency times 2-rank float32 all-reduces of n elements,
// one at a time, and reports the p50 of the end to end time and of the
// launch.
func benchAllReduceLatency(b *testing.B, n int) {
	w := newWorld(b, 2)
	xs := []*array.Array{}
	for r := range 2 {
		x, _ := array.Full(w.s[r], []int{n}, gpu.Float32, 1)
		if err := x.Wait(testenv.Ctx(b, 5*time.Second)); err != nil {
			b.Fatal(err)
		}
		xs = append(xs, x)
	}
	ctx := testenv.Ctx(b, 5*time.Minute)
	lat := make([]time.Duration, 0, b.N)
	launch := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		y0, err := w.groups[0].AllReduce(w.s[0], xs[0], collectives.Sum)
		if err != nil {
			b.Fatal(err)
		}
		y1, err := w.groups[1].AllReduce(w.s[1], xs[1], collectives.Sum)
		if err != nil {
			b.Fatal(err)
		}
		launch = append(launch, time.Since(t0))
		if err := y0.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		if err := y1.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(p50us(lat), "p50-us")
	b.ReportMetric(p50us(launch), "launch-us")
}

// p50us is the median of ds in microseconds.
func p50us(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)/2].Nanoseconds()) / 1e3
}

// BenchmarkAllReduceBandwidth: 4 ranks, float32, in place (donated), bus
// bandwidth as nccl-tests defines it, with a memcpy of the same size.
func BenchmarkAllReduceBandwidth(b *testing.B) {
	for _, size := range []int{1 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			const n = 4
			w := newWorld(b, n)
			xs := make([]*array.Array, n)
			ctx := testenv.Ctx(b, 10*time.Minute)
			for r := range n {
				xs[r], _ = array.Full(w.s[r], []int{size / 4}, gpu.Float32, 0)
				if err := xs[r].Wait(ctx); err != nil { // fresh pages fault in outside the clock
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(size))
			for i := range b.N + 1 { // the first op warms the staging buffers up, untimed
				if i == 1 {
					b.ResetTimer()
				}
				var wg sync.WaitGroup
				for r := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						y, err := w.groups[r].AllReduce(w.s[r], xs[r], collectives.Sum, collectives.Donate())
						if err != nil {
							b.Error(err)
							return
						}
						xs[r] = y
					}()
				}
				wg.Wait()
				for _, x := range xs {
					if err := x.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			el := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(size)/el/1e9*2*(n-1)/n, "busbw-GB/s")
		})
	}
}

// BenchmarkMemcpy is the single-core copy reference for the above.
func BenchmarkMemcpy(b *testing.B) {
	src, dst := make([]byte, 64<<20), make([]byte, 64<<20)
	copy(dst, src)
	b.SetBytes(64 << 20)
	b.ResetTimer()
	for range b.N {
		copy(dst, src)
	}
}
