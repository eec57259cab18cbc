//go:build darwin

package metal

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/gputest"
	"github.com/choreo-gpu/choreo/metalshader"
)

// These tests need a Mac with a Metal GPU (docs/metal.md); the shared
// fence mode needs macOS 15 (MSL 3.2) and a Metal3 GPU.

func openMode(mode FenceMode, opts ...Option) func(t *testing.T) gpu.Device {
	return func(t *testing.T) gpu.Device {
		t.Helper()
		dev, err := Open(append([]Option{WithFenceMode(mode)}, opts...)...)
		if err != nil {
			t.Fatalf("metal.Open(%s): %v", mode, err)
		}
		return dev
	}
}

// Every kernel of every metalshader library compiles into a pipeline.
func TestEveryShaderCompiles(t *testing.T) {
	dev := openMode(FenceEvent)(t).(*Device)
	defer dev.Close()
	for _, l := range metalshader.Libraries() {
		t.Run(l.Name, func(t *testing.T) {
			if err := dev.pipes.compile(l.Name); err != nil {
				t.Fatal(err)
			}
			for _, k := range l.Kernels {
				pl, err := dev.pipes.get(k)
				if err != nil {
					t.Errorf("kernel %s: %v", k, err)
					continue
				}
				if pl.maxThreads == 0 {
					t.Errorf("kernel %s: maxTotalThreadsPerThreadgroup is 0", k)
				}
			}
		})
	}
}

func TestConformanceEventFences(t *testing.T) { gputest.Run(t, openMode(FenceEvent)) }

func TestConformanceSharedFences(t *testing.T) { gputest.Run(t, openMode(FenceShared)) }

// A fast-mode GPU wait gives up after its poll bound: the batch fails with
// ErrWaitTimeout naming the command, the commands after it do not run, and
// the queue goes on.
func TestSharedWaitGivesUp(t *testing.T) {
	dev := openMode(FenceShared, WithWaitPolls(1000))(t)
	defer dev.Close()
	q, err := dev.NewQueue()
	if err != nil {
		t.Fatal(err)
	}
	w, err := dev.NewFenceWord()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := dev.Alloc(64, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	run := func(cmds ...gpu.Command) error {
		t.Helper()
		done := make(chan error, 1)
		if err := q.Submit(cmds, func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			return err
		case <-time.After(gputest.Timeout):
			t.Fatalf("batch not done after %v", gputest.Timeout)
			return nil
		}
	}
	err = run(
		gpu.Fill{Dst: buf, DType: gpu.Int32, N: 16, Value: gpu.Int(7)},
		gpu.WaitValue{Word: w, Value: 1},
		gpu.Fill{Dst: buf, DType: gpu.Int32, N: 16, Value: gpu.Int(9)},
	)
	if !errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("batch error %v, want ErrWaitTimeout", err)
	}
	if got := buf.Bytes()[0]; got != 7 {
		t.Errorf("element 0 = %d: want 7 (the fill before the wait ran, the one after did not)", got)
	}
	if err := run(gpu.Fill{Dst: buf, DType: gpu.Int32, N: 16, Value: gpu.Int(3)}); err != nil {
		t.Fatalf("queue after a timed-out wait: %v", err)
	}
	if got := buf.Bytes()[0]; got != 3 {
		t.Errorf("element 0 = %d after the next batch, want 3", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := q.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// gpu.Open("metal") finds this backend through the registry.
func TestOpenThroughRegistry(t *testing.T) {
	dev, err := gpu.Open(Name)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	p := dev.Properties()
	if p.Backend != Name || p.Name == "" || !p.HostVisibleDeviceMem {
		t.Errorf("properties %+v", p)
	}
}

func BenchmarkEventFences(b *testing.B) { gputest.Bench(b, openForBench(FenceEvent)) }

func BenchmarkSharedFences(b *testing.B) { gputest.Bench(b, openForBench(FenceShared)) }

func openForBench(mode FenceMode) func(tb testing.TB) gpu.Device {
	return func(tb testing.TB) gpu.Device {
		dev, err := Open(WithFenceMode(mode))
		if err != nil {
			tb.Fatalf("metal.Open(%s): %v", mode, err)
		}
		return dev
	}
}
