package fence_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/internal/testenv"
)

// BenchmarkFenceRoundTrip measures CPU->GPU->CPU through the fence API: the
// CPU's Update lets the GPU stream pass its wait, the stream's update lets
// the CPU's Wait return. The GPU side is encoded before the clock starts;
// p50 and p90 of the timed part are reported (target p50 <= 5 us on sim).
func BenchmarkFenceRoundTrip(b *testing.B) { benchRoundTrip(b, 1, 0) }

// BenchmarkFenceRoundTripSettled is the same with the GPU side given 20 us
// or 200 us (untimed) to reach the device before the CPU's Update, as a raw
// stream-memop round trip measures it: the fence's own cost, without the
// enqueue path.
func BenchmarkFenceRoundTripSettled(b *testing.B) {
	for _, settle := range []time.Duration{20 * time.Microsecond, 200 * time.Microsecond} {
		b.Run(settle.String(), func(b *testing.B) { benchRoundTrip(b, 1, settle) })
	}
}

// BenchmarkFenceRoundTripPipelined measures the round trip the way the raw
// stream-memop floor is measured (gpu/cuda BenchmarkRawRoundTripMemop): the
// GPU sides of 64 round trips are encoded and given 1 ms to reach the
// device (untimed), then each CPU Update + Wait is timed.
func BenchmarkFenceRoundTripPipelined(b *testing.B) { benchRoundTrip(b, 64, time.Millisecond) }

// benchRoundTrip encodes the GPU sides of batch round trips, sleeps settle,
// then times each round trip's CPU Update + Wait.
func benchRoundTrip(b *testing.B, batch int, settle time.Duration) {
	dev := testenv.Device(b)
	rt := testenv.Runtime(b)
	s := testenv.Stream(b, rt, dev)
	f, err := testenv.Fences(b, rt).New(dev)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Release()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	pause := batch > 1 // b.StopTimer stops the world to read memory stats: not per op
	for base := 0; base < b.N; base += batch {
		if pause {
			b.StopTimer()
		}
		end := min(base+batch, b.N)
		for range end - base {
			if _, err := f.WaitGPU(s, nil); err != nil {
				b.Fatal(err)
			}
			if err := f.UpdateGPU(s, nil); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(settle) // 0: just let the stream actor run
		if pause {
			b.StartTimer()
		}
		for range end - base {
			t0 := time.Now()
			if err := f.Update(); err != nil {
				b.Fatal(err)
			}
			if err := f.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-us")
	b.ReportMetric(float64(lat[len(lat)*9/10].Nanoseconds())/1e3, "p90-us")
}

// BenchmarkFenceLifecycle: a whole fence per op: New, GPU wait + update
// encoded, CPU update + wait, Release.
func BenchmarkFenceLifecycle(b *testing.B) {
	dev := testenv.Device(b)
	rt := testenv.Runtime(b)
	s := testenv.Stream(b, rt, dev)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ResetTimer()
	for range b.N {
		f, err := testenv.Fences(b, rt).New(dev)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.WaitGPU(s, nil); err != nil {
			b.Fatal(err)
		}
		if err := f.UpdateGPU(s, nil); err != nil {
			b.Fatal(err)
		}
		if err := f.Update(); err != nil {
			b.Fatal(err)
		}
		if err := f.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		f.Release()
	}
}
