package sim_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/sim"
)

func newDev(t *testing.T, opts ...sim.Option) *sim.Device {
	t.Helper()
	dev, err := sim.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	return dev
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// waitDone waits (bounded) for an error on ch.
func waitDone(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("batch not completed within 10s")
		return nil
	}
}

// TestAlignment: every buffer starts on a 64-byte boundary.
func TestAlignment(t *testing.T) {
	dev := newDev(t)
	for _, n := range []int{1, 3, 8, 63, 64, 65, 1000, 1 << 20} {
		for _, k := range []gpu.MemKind{gpu.DeviceMem, gpu.HostMem} {
			b := must[gpu.Buffer](t)(dev.Alloc(n, k))
			if p := uintptr(unsafe.Pointer(&b.Bytes()[0])); p%64 != 0 {
				t.Errorf("Alloc(%d, %v) at %#x", n, k, p)
			}
			if len(b.Bytes()) != n || cap(b.Bytes()) != n {
				t.Errorf("Alloc(%d, %v): len %d cap %d", n, k, len(b.Bytes()), cap(b.Bytes()))
			}
		}
	}
}

// TestDevicesIndependent: closing one device leaves another working, and
// a device refuses buffers and words of another.
func TestDevicesIndependent(t *testing.T) {
	d1, d2 := newDev(t), newDev(t)
	q1 := must[gpu.Queue](t)(d1.NewQueue())
	q2 := must[gpu.Queue](t)(d2.NewQueue())
	b1 := must[gpu.Buffer](t)(d1.Alloc(64, gpu.DeviceMem))
	b2 := must[gpu.Buffer](t)(d2.Alloc(64, gpu.DeviceMem))
	w1 := must[gpu.FenceWord](t)(d1.NewFenceWord())

	err := q2.Submit([]gpu.Command{gpu.Copy{Dst: b2, Src: b1, Bytes: 8}}, nil)
	if !errors.Is(err, gpu.ErrBadArgument) || !strings.Contains(err.Error(), "another device") {
		t.Errorf("foreign buffer: %v", err)
	}
	err = q2.Submit([]gpu.Command{gpu.WriteValue{Word: w1, Value: 1}}, nil)
	if !errors.Is(err, gpu.ErrBadArgument) {
		t.Errorf("foreign word: %v", err)
	}

	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d1.Close(); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("second Device.Close: %v", err)
	}
	if err := q1.Submit(nil, nil); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("Submit on a closed device's queue: %v", err)
	}
	if b1.Bytes() != nil {
		t.Error("buffer of a closed device still has memory")
	}
	done := make(chan error, 1)
	if err := q2.Submit([]gpu.Command{gpu.Fill{Dst: b2, DType: gpu.Int64, N: 8, Value: gpu.Int(5)}},
		func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if b2.Bytes()[0] != 5 {
		t.Error("fill on the surviving device did not land")
	}
}

// TestDeviceCloseReleases: Device.Close with a queue blocked on a wait
// returns after about the close timeout with DeadlineExceeded, fails the
// batch with ErrClosed, releases the word, and fails CPU waits on the
// device's words with ErrClosed.
func TestDeviceCloseReleases(t *testing.T) {
	dev := newDev(t, sim.WithCloseTimeout(100*time.Millisecond))
	q := must[gpu.Queue](t)(dev.NewQueue())
	never := must[gpu.FenceWord](t)(dev.NewFenceWord())
	other := must[gpu.FenceWord](t)(dev.NewFenceWord())
	done := make(chan error, 1)
	if err := q.Submit([]gpu.Command{gpu.WaitValue{Word: never, Value: 5}},
		func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	cpuWait := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cpuWait <- other.Wait(ctx, 1, nil)
	}()
	// A bound, not a speed: the blocked work never ends, so a Close that
	// waited for it would never return; a loaded machine may take seconds
	// past the 100 ms close timeout.
	closed := make(chan error, 1)
	go func() { closed <- dev.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Device.Close with blocked work: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Device.Close with blocked work did not return within 30 s")
	}
	if err := waitDone(t, done); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("blocked batch: %v", err)
	}
	if v := never.Load(); v != gpu.StopValue {
		t.Errorf("word %#x, want StopValue", v)
	}
	if err := waitDone(t, cpuWait); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("CPU wait on a closed device's word: %v", err)
	}
}
