package streams_test

import (
	"context"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// BenchmarkGPUStreamCommands: tiny commands through the stream actor to the
// device queue; reports commands per second (target >= 1M/s on sim).
func BenchmarkGPUStreamCommands(b *testing.B) {
	dev := testenv.Device(b)
	rt := testenv.Runtime(b)
	s := testenv.Stream(b, rt, dev)
	buf, _ := dev.Alloc(4, gpu.DeviceMem)
	cmd := []gpu.Command{gpu.Fill{Dst: buf, DType: gpu.Int32, N: 1, Value: gpu.Int(1)}}
	b.ResetTimer()
	start := time.Now()
	var ev streams.Event
	var err error
	for range b.N {
		if ev, err = s.Enqueue(cmd, nil); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ev.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cmds/s")
}

// BenchmarkCommTasks: empty tasks through the communication stream.
func BenchmarkCommTasks(b *testing.B) {
	rt := testenv.Runtime(b)
	comm := testenv.DefaultComm(b, rt)
	done := make(chan struct{})
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		t := streams.Task{Name: "noop", Run: func(context.Context) error { return nil }}
		if i == b.N-1 {
			t.Done = func(error) { close(done) }
		}
		if err := comm.Submit(t); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatal("tasks did not finish")
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
}
