//go:build linux

package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/gputest"
	_ "github.com/choreo-gpu/choreo/gpu/sim" // "auto" falls back to it
)

// openDev opens a device with o, skipping the test where this machine has
// no usable CUDA driver or GPU. Any other error (a missing PTX included)
// fails the test. The device is closed when the test ends.
func openDev(tb testing.TB, o Options) *Device {
	tb.Helper()
	d, err := New(o)
	if errors.Is(err, ErrUnavailable) {
		tb.Skipf("skipping: no CUDA driver or GPU on this machine: %v", err)
	}
	if err != nil {
		tb.Fatalf("cuda.New: %v", err)
	}
	tb.Cleanup(func() { _ = d.Close() })
	return d
}

var modes = []struct {
	name string
	opts Options
}{
	{"memop", Options{}},
	{"kernel", Options{MonotonicKernel: true}},
}

func TestConformance(t *testing.T) {
	openDev(t, Options{}) // skip the whole suite where there is no GPU
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			gputest.Run(t, func(t *testing.T) gpu.Device { return openDev(t, m.opts) })
		})
	}
}

// TestOpenWithoutDriver: where libcuda.so.1 is missing, gpu.Open("cuda")
// fails with the dlopen message wrapping gpu.ErrNoBackend, and "auto"
// falls back to sim. Where CUDA works, "auto" picks it.
func TestOpenWithoutDriver(t *testing.T) {
	dev, err := gpu.Open(Name)
	if err == nil {
		defer dev.Close()
		auto, err := gpu.Open("auto")
		if err != nil {
			t.Fatalf("auto with a working CUDA: %v", err)
		}
		defer auto.Close()
		if b := auto.Properties().Backend; b != Name {
			t.Errorf("auto picked %q with a working CUDA, want %q", b, Name)
		}
		return
	}
	if !errors.Is(err, gpu.ErrNoBackend) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open(cuda) error %v: want one wrapping ErrNoBackend and ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "libcuda") && !strings.Contains(err.Error(), "cuInit") {
		t.Errorf("Open(cuda) error %q names neither the library nor cuInit", err)
	}
	auto, err := gpu.Open("auto")
	if err != nil {
		t.Fatalf("auto without CUDA: %v", err)
	}
	defer auto.Close()
	if b := auto.Properties().Backend; b != "sim" {
		t.Errorf("auto without CUDA picked %q, want sim", b)
	}
}

func TestProperties(t *testing.T) {
	d := openDev(t, Options{})
	p := d.Properties()
	t.Logf("device: %+v", p)
	if p.Backend != Name || p.Name == "" || p.MemoryBytes < 1<<30 {
		t.Errorf("properties %+v: want backend cuda, a name, at least 1 GiB", p)
	}
	if len(p.ComputeCapability) < 3 || p.ComputeCapability[1] != '.' && p.ComputeCapability[2] != '.' {
		t.Errorf("compute capability %q is not major.minor", p.ComputeCapability)
	}
	if p.HostVisibleDeviceMem {
		t.Errorf("HostVisibleDeviceMem is true; DeviceMem is cuMemAlloc memory")
	}
}

// run submits cmds on q and returns the error done reports, bounded.
func run(t *testing.T, q gpu.Queue, cmds ...gpu.Command) error {
	t.Helper()
	ch := make(chan error, 1)
	if err := q.Submit(cmds, func(err error) { ch <- err }); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("batch %v not done within 10s", cmds)
		return nil
	}
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustQueue(t *testing.T, d *Device) gpu.Queue {
	t.Helper()
	q, err := d.NewQueue()
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = q.Close(ctx)
	})
	return q
}

func mustWord(t *testing.T, d *Device) gpu.FenceWord {
	t.Helper()
	w, err := d.NewFenceWord()
	if err != nil {
		t.Fatalf("NewFenceWord: %v", err)
	}
	t.Cleanup(w.Free)
	return w
}

// TestCyclicStopValue: a GPU wait for 1000 queued on the stream is
// released by the CPU storing gpu.StopValue (0x7FFFFFFF), under the
// driver's cyclic comparison.
func TestCyclicStopValue(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			d := openDev(t, m.opts)
			q := mustQueue(t, d)
			a, b := mustWord(t, d), mustWord(t, d)
			ch := make(chan error, 1)
			if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: a, Value: 1000}, gpu.WriteValue{Word: b, Value: 1}},
				func(err error) { ch <- err }); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			if v := b.Load(); v != 0 {
				t.Fatalf("write behind an unmet wait ran: b = %d", v)
			}
			a.Store(gpu.StopValue)
			if err := b.Wait(ctx10(t), 1, nil); err != nil {
				t.Fatalf("wait for 1000 not released by StopValue: %v", err)
			}
			if err := <-ch; err != nil {
				t.Fatalf("batch: %v", err)
			}
		})
	}
}

// TestReleaseOnFailure: a GPU-side wait whose CPU side never comes holds
// back the work behind it until the CPU stores StopValue; then the stream
// goes on and runs that work.
func TestReleaseOnFailure(t *testing.T) {
	d := openDev(t, Options{})
	q := mustQueue(t, d)
	never, done := mustWord(t, d), mustWord(t, d)
	buf, err := d.Alloc(4096, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	host, err := d.Alloc(4096, gpu.HostMem)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 2)
	cb := func(err error) { ch <- err }
	if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: never, Value: 5}}, cb); err != nil {
		t.Fatal(err)
	}
	if err := q.Submit([]gpu.Command{
		gpu.Fill{Dst: buf, DType: gpu.Int32, N: 1024, Value: gpu.Int(7)},
		gpu.Copy{Dst: host, Src: buf, Bytes: 4096},
		gpu.WriteValue{Word: done, Value: 1},
	}, cb); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := done.Wait(short, 1, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("work behind the unreleased wait: Wait = %v, want DeadlineExceeded", err)
	}
	never.Store(gpu.StopValue) // the failure path's release
	if err := done.Wait(ctx10(t), 1, nil); err != nil {
		t.Fatalf("stream did not go on after the release: %v", err)
	}
	for range 2 {
		if err := <-ch; err != nil {
			t.Errorf("batch: %v", err)
		}
	}
	if got := host.Bytes()[:4]; got[0] != 7 || got[1] != 0 {
		t.Errorf("fill behind the released wait: first element bytes % x, want 07 00 00 00", got)
	}
	if err := run(t, q, gpu.WriteValue{Word: done, Value: 2}); err != nil || done.Load() != 2 {
		t.Errorf("queue after the release: err %v, word %d", err, done.Load())
	}
}

// TestWriteValueMonotonic: GPU writes 9 then 5 leave 9 in both modes; a
// CPU release of a GPU-written word, stored while a GPU write of a smaller
// value waits on the stream, is what the word holds once that batch is
// done (the kernel keeps it, memop needs the queue's repair).
func TestWriteValueMonotonic(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			d := openDev(t, m.opts)
			q := mustQueue(t, d)
			w, gate := mustWord(t, d), mustWord(t, d)
			if err := run(t, q, gpu.WriteValue{Word: w, Value: 9}, gpu.WriteValue{Word: w, Value: 5}); err != nil {
				t.Fatal(err)
			}
			if v := w.Load(); v != 9 {
				t.Errorf("writes 9, 5: word %d, want 9", v)
			}
			ch := make(chan error, 1)
			if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: gate, Value: 1}, gpu.WriteValue{Word: w, Value: 10}},
				func(err error) { ch <- err }); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // the write is on the stream, behind the gate
			w.Store(gpu.StopValue)
			gate.Store(1)
			if err := <-ch; err != nil {
				t.Fatal(err)
			}
			if v := w.Load(); v != gpu.StopValue {
				t.Errorf("released word after a queued GPU write of 10: %#x, want StopValue", v)
			}
		})
	}
}

// TestFreeAndAllocWhileBlocked: freeing and allocating memory while a
// stream is blocked on a fence neither hangs the caller nor the device.
// cuMemFree synchronizes with the context, so frees run on the reaper
// thread; the failure message names the step that did not return.
func TestFreeAndAllocWhileBlocked(t *testing.T) {
	d := openDev(t, Options{})
	q := mustQueue(t, d)
	gate := mustWord(t, d)
	ch := make(chan error, 1)
	if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: gate, Value: 1}}, func(err error) { ch <- err }); err != nil {
		t.Fatal(err)
	}
	defer gate.Store(gpu.StopValue)
	time.Sleep(10 * time.Millisecond) // the wait is on the stream
	var step atomic.Value
	step.Store("start")
	finished := make(chan error, 1)
	go func() {
		var bufs []gpu.Buffer
		for _, s := range []struct {
			name string
			kind gpu.MemKind
			free bool
		}{
			{"alloc device", gpu.DeviceMem, false},
			{"alloc host", gpu.HostMem, false},
			{"alloc device after frees", gpu.DeviceMem, true},
			{"alloc host after frees", gpu.HostMem, true},
			{"alloc device after more frees", gpu.DeviceMem, true},
		} {
			if s.free {
				for _, b := range bufs {
					b.Free()
				}
				bufs = nil
			}
			step.Store(s.name)
			b, err := d.Alloc(1<<20, s.kind)
			if err != nil {
				finished <- fmt.Errorf("%s: %w", s.name, err)
				return
			}
			bufs = append(bufs, b)
		}
		finished <- nil
	}()
	select {
	case err := <-finished:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%q blocked for 5s while a stream waits on a fence", step.Load())
	}
	gate.Store(1)
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
}

// TestManyBatchesBehindWait: far more commands than the in-flight budget
// queue up behind a blocked wait without blocking Submit (the launch-queue
// trap), and all complete in order once the wait is released.
func TestManyBatchesBehindWait(t *testing.T) {
	d := openDev(t, Options{})
	q := mustQueue(t, d)
	gate, w := mustWord(t, d), mustWord(t, d)
	if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: gate, Value: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	order := make(chan int, n)
	start := time.Now()
	for i := range n {
		if err := q.Submit([]gpu.Command{gpu.WriteValue{Word: w, Value: uint32(i + 1)}, gpu.WaitValue{Word: gate, Value: 1}},
			func(err error) {
				if err != nil {
					t.Errorf("batch %d: %v", i, err)
				}
				order <- i
			}); err != nil {
			t.Fatal(err)
		}
	}
	if dt := time.Since(start); dt > 2*time.Second {
		t.Errorf("submitting %d batches behind a blocked wait took %v", n, dt)
	}
	if v := w.Load(); v != 0 {
		t.Fatalf("writes behind the gate ran: word %d", v)
	}
	gate.Store(1)
	for i := range n {
		select {
		case got := <-order:
			if got != i {
				t.Fatalf("batch %d completed in position %d", got, i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d batches completed", i, n)
		}
	}
	if v := w.Load(); v != n {
		t.Errorf("word %d after all batches, want %d", v, n)
	}
}
