//go:build linux

// Benchmarks of the CUDA backend. Build a static test binary here (no cgo,
// no GPU needed) and run it on the GPU machine:
//
//	CGO_ENABLED=0 go test -c -o .devbin/cuda.test ./gpu/cuda
//	.devbin/cuda.test -test.v -test.run . -test.bench . -test.benchtime 2000x
//
// The PTX must be embedded first (gpu/cuda/kernels/gen.sh with nvcc, then
// rebuild), otherwise every test and benchmark fails with ErrNoKernels.

package cuda

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/gputest"
)

// BenchmarkBackend runs the shared backend benchmarks (commands/s, fence
// round trip and batch latency through Queue.Submit and FenceWord) in
// both WriteValue modes.
func BenchmarkBackend(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			gputest.Bench(b, func(tb testing.TB) gpu.Device { return openDev(tb, m.opts) })
		})
	}
}

// rawStream is a stream and two fence words for the driver-level
// benchmarks, which run their loops on the device's main thread.
type rawStream struct {
	d    *Device
	s    cuStream
	a, b *word
}

func newRawStream(b *testing.B, d *Device) *rawStream {
	b.Helper()
	r := &rawStream{d: d}
	a := d.api
	if err := do(d.main, func() error {
		return a.errorf("cuStreamCreate", a.cuStreamCreate(&r.s, streamNonBlocking))
	}); err != nil {
		b.Fatal(err)
	}
	var err error
	if r.a, err = d.newWord(); err != nil {
		b.Fatal(err)
	}
	if r.b, err = d.newWord(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		// Release any wait a failed run left on the stream, so the
		// synchronize is bounded.
		atomic.StoreUint32(r.a.s.p, gpu.StopValue)
		do(d.main, func() error { a.cuStreamSynchronize(r.s); a.cuStreamDestroy(r.s); return nil })
		r.a.Free()
		r.b.Free()
	})
	return r
}

// spinUntil polls w until it is >= v, up to 10 s.
func spinUntil(w *word, v uint32) error {
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; w.load() < v; i++ {
		if i%4096 == 0 && time.Now().After(deadline) {
			return fmt.Errorf("word stuck at %d, want %d", w.load(), v)
		}
	}
	return nil
}

func reportP50(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// benchRawRoundTrip: the CPU stores word A = i, the GPU (waiting for A >= i)
// writes B = i, the CPU polls B. Wait/write pairs are enqueued 64 at a time
// with the timer stopped, so ns/op is the round trip alone.
func benchRawRoundTrip(b *testing.B, kernel bool, batch int, settle time.Duration) {
	d := openDev(b, Options{})
	r := newRawStream(b, d)
	a := d.api
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	err := do(d.main, func() error {
		for base := 0; base < b.N; base += batch {
			b.StopTimer()
			end := min(base+batch, b.N)
			for i := base; i < end; i++ {
				v := uint32(i + 1)
				if err := a.errorf("cuStreamWaitValue32_v2", a.cuStreamWaitValue32(r.s, r.a.s.dptr, v, streamWaitValueGEQ)); err != nil {
					return err
				}
				var err error
				if kernel {
					err = d.kern.storeMaxWord(a, r.s, r.b.s.dptr, v)
				} else {
					err = a.errorf("cuStreamWriteValue32_v2", a.cuStreamWriteValue32(r.s, r.b.s.dptr, v, streamWriteValueDefault))
				}
				if err != nil {
					return err
				}
			}
			time.Sleep(settle) // let the enqueued work reach the GPU
			b.StartTimer()
			for i := base; i < end; i++ {
				v := uint32(i + 1)
				t0 := time.Now()
				atomic.StoreUint32(r.a.s.p, v)
				if err := spinUntil(r.b, v); err != nil {
					return err
				}
				lat = append(lat, time.Since(t0))
			}
		}
		return nil
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	reportP50(b, lat)
}

func BenchmarkRawRoundTripMemop(b *testing.B)  { benchRawRoundTrip(b, false, 64, time.Millisecond) }
func BenchmarkRawRoundTripKernel(b *testing.B) { benchRawRoundTrip(b, true, 64, time.Millisecond) }

// BenchmarkRawRoundTripSettled: one wait/write pair at a time, the GPU
// left blocked in its wait for 20 us or 200 us before the CPU's store, as
// the fence that guards a collective's output is. Measured on the H200 the
// GPU then takes longer to notice the store than in the back-to-back
// pipeline above.
func BenchmarkRawRoundTripSettled(b *testing.B) {
	for _, settle := range []time.Duration{20 * time.Microsecond, 200 * time.Microsecond} {
		b.Run(settle.String(), func(b *testing.B) { benchRawRoundTrip(b, false, 1, settle) })
	}
}

// BenchmarkEventSync: a stream write, cuEventRecord, cuEventSynchronize.
func BenchmarkEventSync(b *testing.B) {
	d := openDev(b, Options{})
	r := newRawStream(b, d)
	a := d.api
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	err := do(d.main, func() error {
		var ev cuEvent
		if err := a.errorf("cuEventCreate", a.cuEventCreate(&ev, eventDisableTiming)); err != nil {
			return err
		}
		defer a.cuEventDestroy(ev)
		for i := range b.N {
			t0 := time.Now()
			if err := a.errorf("cuStreamWriteValue32_v2", a.cuStreamWriteValue32(r.s, r.b.s.dptr, uint32(i+1), streamWriteValueDefault)); err != nil {
				return err
			}
			if err := a.errorf("cuEventRecord", a.cuEventRecord(ev, r.s)); err != nil {
				return err
			}
			if err := a.errorf("cuEventSynchronize", a.cuEventSynchronize(ev)); err != nil {
				return err
			}
			lat = append(lat, time.Since(t0))
		}
		return nil
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	reportP50(b, lat)
}

// BenchmarkLaunchSync: a one-thread kernel launch and cuStreamSynchronize.
func BenchmarkLaunchSync(b *testing.B) {
	d := openDev(b, Options{})
	r := newRawStream(b, d)
	a := d.api
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	err := do(d.main, func() error {
		for i := range b.N {
			t0 := time.Now()
			if err := d.kern.storeMaxWord(a, r.s, r.b.s.dptr, uint32(i+1)); err != nil {
				return err
			}
			if err := a.errorf("cuStreamSynchronize", a.cuStreamSynchronize(r.s)); err != nil {
				return err
			}
			lat = append(lat, time.Since(t0))
		}
		return nil
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	reportP50(b, lat)
}

// BenchmarkQueueRoundTrip: the fence round trip through the backend's own
// API: Submit [WaitValue A, WriteValue B], A.Store from the CPU, B.Wait.
// The settled cases leave the GPU blocked in its wait for a while (untimed)
// before the CPU's store, as a fence that guards a collective's output is.
func BenchmarkQueueRoundTrip(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) { benchQueueRoundTrip(b, m.opts, 0) })
	}
	for _, settle := range []time.Duration{20 * time.Microsecond, 200 * time.Microsecond} {
		b.Run(fmt.Sprintf("memop-settled%v", settle), func(b *testing.B) { benchQueueRoundTrip(b, Options{}, settle) })
	}
}

func benchQueueRoundTrip(b *testing.B, opts Options, settle time.Duration) {
	d := openDev(b, opts)
	q, err := d.NewQueue()
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close(context.Background())
	wa, _ := d.NewFenceWord()
	wb, _ := d.NewFenceWord()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lat := make([]time.Duration, 0, b.N)
	errs := make(chan error, 1)
	b.ResetTimer()
	for i := range b.N {
		v := uint32(i + 1)
		if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: wa, Value: v}, gpu.WriteValue{Word: wb, Value: v}},
			func(err error) {
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}); err != nil {
			b.Fatal(err)
		}
		if settle > 0 {
			time.Sleep(settle)
		}
		t0 := time.Now()
		wa.Store(v)
		if err := wb.Wait(ctx, v, nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	reportP50(b, lat)
}

// BenchmarkCopy64MiB: 64 MiB device-to-host and host-to-device copies
// through Queue.Submit (b.SetBytes: MB/s is the bandwidth).
func BenchmarkCopy64MiB(b *testing.B) {
	const n = 64 << 20
	for _, dir := range []string{"DtoH", "HtoD"} {
		b.Run(dir, func(b *testing.B) {
			d := openDev(b, Options{})
			q, err := d.NewQueue()
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close(context.Background())
			dev, err := d.Alloc(n, gpu.DeviceMem)
			if err != nil {
				b.Fatal(err)
			}
			host, err := d.Alloc(n, gpu.HostMem)
			if err != nil {
				b.Fatal(err)
			}
			c := gpu.Copy{Dst: host, Src: dev, Bytes: n}
			if dir == "HtoD" {
				c = gpu.Copy{Dst: dev, Src: host, Bytes: n}
			}
			done := make(chan error, 1)
			b.SetBytes(n)
			b.ResetTimer()
			for range b.N {
				if err := q.Submit([]gpu.Command{c}, func(err error) { done <- err }); err != nil {
					b.Fatal(err)
				}
				select {
				case err := <-done:
					if err != nil {
						b.Fatal(err)
					}
				case <-time.After(10 * time.Second):
					b.Fatal("copy not done in 10s")
				}
			}
		})
	}
}

// BenchmarkSmallStage: what staging a tiny payload costs on the GPU, end
// to end through Queue.Submit (p50 of submit-to-CPU-sees-the-word).
// "in": [copy 4 B device->host, write B]; "out": [wait A, copy 4 B
// host->device, write B] with A stored right after the submit. The copy is
// the copy engine (cuMemcpyAsync) or a byte kernel (Scale on uint8 by 1);
// "none" has no copy, the fence commands alone.
func BenchmarkSmallStage(b *testing.B) {
	const n = 4
	for _, dir := range []string{"in", "out"} {
		for _, how := range []string{"none", "memcpy", "kernel"} {
			b.Run(dir+"/"+how, func(b *testing.B) {
				d := openDev(b, Options{})
				q, err := d.NewQueue()
				if err != nil {
					b.Fatal(err)
				}
				defer q.Close(context.Background())
				dev, _ := d.Alloc(n, gpu.DeviceMem)
				host, _ := d.Alloc(n, gpu.HostMem)
				wa, _ := d.NewFenceWord()
				wb, _ := d.NewFenceWord()
				dst, src := gpu.Buffer(host), gpu.Buffer(dev)
				if dir == "out" {
					dst, src = dev, host
				}
				var cp []gpu.Command
				switch how {
				case "memcpy":
					cp = []gpu.Command{gpu.Copy{Dst: dst, Src: src, Bytes: n}}
				case "kernel":
					cp = []gpu.Command{gpu.Scale{Dst: dst, Src: src, DType: gpu.Uint8, N: n, Factor: gpu.Float(1)}}
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := range b.N {
					v := uint32(i + 1)
					var cmds []gpu.Command
					if dir == "out" {
						cmds = append(cmds, gpu.WaitValue{Word: wa, Value: v})
					}
					cmds = append(append(cmds, cp...), gpu.WriteValue{Word: wb, Value: v})
					t0 := time.Now()
					if err := q.Submit(cmds, nil); err != nil {
						b.Fatal(err)
					}
					if dir == "out" {
						wa.Store(v)
					}
					if err := wb.Wait(ctx, v, nil); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				b.StopTimer()
				reportP50(b, lat)
			})
		}
	}
}
