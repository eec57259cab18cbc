package gputest

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// Bench runs the backend benchmarks as sub-benchmarks of b:
//
//   - Commands/batch=K: tiny commands (a 1-element fill) submitted K per
//     batch with up to 64 batches in flight; reports cmds/s.
//   - RoundTrip: a CPU -> GPU -> CPU fence round trip: submit [WaitValue A,
//     WriteValue B], Store A from the CPU, wait for B on the CPU; ns/op is
//     one round trip, p50-ns and p99-ns its percentiles.
//   - RoundTripPresubmitted: the same with each trip's batch submitted
//     before its clock starts, so only Store -> queue -> Wait is timed.
//   - BatchLatency: submit an empty batch and wait for its done.
//
// open returns a fresh device; Bench closes it.
func Bench(b *testing.B, open func(tb testing.TB) gpu.Device) {
	for _, k := range []int{1, 16, 256} {
		b.Run("Commands/batch="+strconv.Itoa(k), func(b *testing.B) { benchCommands(b, open, k) })
	}
	b.Run("RoundTrip", func(b *testing.B) { benchRoundTrip(b, open, false) })
	b.Run("RoundTripPresubmitted", func(b *testing.B) { benchRoundTrip(b, open, true) })
	b.Run("BatchLatency", func(b *testing.B) { benchBatchLatency(b, open) })
}

// benchDevice opens a device and a queue that are closed when b ends.
func benchDevice(b *testing.B, open func(tb testing.TB) gpu.Device) (gpu.Device, gpu.Queue) {
	dev := open(b)
	b.Cleanup(func() { _ = dev.Close() })
	q, err := dev.NewQueue()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		_ = q.Close(ctx)
	})
	return dev, q
}

func benchCommands(b *testing.B, open func(tb testing.TB) gpu.Device, perBatch int) {
	dev, q := benchDevice(b, open)
	buf, err := dev.Alloc(64, gpu.DeviceMem)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]gpu.Command, perBatch)
	for i := range batch {
		batch[i] = gpu.Fill{Dst: buf, DType: gpu.Float32, N: 1, Value: gpu.Float(float64(i))}
	}
	// At most window batches in flight; the submitter polls a counter
	// rather than blocking on a channel, so the benchmark's own
	// synchronisation stays small next to the backend's.
	const window = 64
	var inflight atomic.Int64
	var failed atomic.Pointer[error]
	done := func(err error) {
		if err != nil {
			e := err
			failed.CompareAndSwap(nil, &e)
		}
		inflight.Add(-1)
	}
	deadline := time.Now().Add(10 * time.Minute)
	waitBelow := func(n int64) {
		for spins := 0; inflight.Load() > n; spins++ {
			runtime.Gosched()
			if spins%1024 == 0 && time.Now().After(deadline) {
				b.Fatal("queue stopped completing batches")
			}
		}
	}
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; sent += perBatch {
		waitBelow(window - 1)
		cmds := batch
		if rest := b.N - sent; rest < perBatch {
			cmds = batch[:rest]
		}
		inflight.Add(1)
		if err := q.Submit(cmds, done); err != nil {
			b.Fatal(err)
		}
	}
	waitBelow(0)
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cmds/s")
}

func benchRoundTrip(b *testing.B, open func(tb testing.TB) gpu.Device, presubmit bool) {
	dev, q := benchDevice(b, open)
	wa, err := dev.NewFenceWord()
	if err != nil {
		b.Fatal(err)
	}
	wb, err := dev.NewFenceWord()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	lat := make([]time.Duration, b.N)
	cmds := make([]gpu.Command, 2)
	submit := func(v uint32) {
		cmds[0] = gpu.WaitValue{Word: wa, Value: v}
		cmds[1] = gpu.WriteValue{Word: wb, Value: v}
		if err := q.Submit(cmds, nil); err != nil {
			b.Fatal(err)
		}
	}
	// Values restart at 1 after 1<<30 trips, when both words are idle (the
	// previous trip completed and the next is not yet submitted).
	value := func(i int) uint32 { return uint32(i%(1<<30)) + 1 }
	b.ResetTimer()
	for i := range b.N {
		v := value(i)
		if v == 1 && i > 0 {
			wa.Reset()
			wb.Reset()
		}
		if presubmit && (i == 0 || v == 1) {
			submit(v)
		}
		t0 := time.Now()
		if !presubmit {
			submit(v)
		}
		wa.Store(v)
		if err := wb.Wait(ctx, v, nil); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
		if next := value(i + 1); presubmit && next != 1 && i+1 < b.N {
			submit(next)
		}
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func benchBatchLatency(b *testing.B, open func(tb testing.TB) gpu.Device) {
	_, q := benchDevice(b, open)
	ch := make(chan error, 1)
	done := func(err error) { ch <- err }
	t := time.NewTimer(10 * time.Minute)
	defer t.Stop()
	b.ResetTimer()
	for range b.N {
		if err := q.Submit(nil, done); err != nil {
			b.Fatal(err)
		}
		select {
		case err := <-ch:
			if err != nil {
				b.Fatal(err)
			}
		case <-t.C:
			b.Fatal("batch not completed")
		}
	}
}

// reportPercentiles adds p50-ns and p99-ns metrics for the samples.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
