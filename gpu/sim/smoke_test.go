package sim_test

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
	_ "github.com/choreo-gpu/choreo/gpu/sim"
)

// TestSmoke runs fill, add, a fence round trip and close on a device opened
// through the registry.
func TestSmoke(t *testing.T) {
	dev, err := gpu.Open("auto")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if p := dev.Properties(); p.Backend != "sim" {
		t.Fatalf("auto opened %q", p.Backend)
	}
	q, err := dev.NewQueue()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := dev.Alloc(16, gpu.DeviceMem)
	h, _ := dev.Alloc(16, gpu.HostMem)
	wa, _ := dev.NewFenceWord()
	wb, _ := dev.NewFenceWord()
	done := make(chan error, 1)
	err = q.Submit([]gpu.Command{
		gpu.WaitValue{Word: wa, Value: 1},
		gpu.Fill{Dst: a, DType: gpu.Float32, N: 4, Value: gpu.Float(1.5)},
		gpu.Add{Dst: a, A: a, B: a, DType: gpu.Float32, N: 4},
		gpu.Copy{Dst: h, Src: a, Bytes: 16},
		gpu.WriteValue{Word: wb, Value: 1},
	}, func(err error) { done <- err })
	if err != nil {
		t.Fatal(err)
	}
	wa.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := wb.Wait(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(h.Bytes()[4*i:])); v != 3 {
			t.Fatalf("element %d = %v, want 3", i, v)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("done not called")
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
