package gputest

import (
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// testBadArguments: Submit refuses a batch with a bad command with an error
// wrapping ErrBadArgument, runs none of its commands and never calls its
// done; the queue keeps working afterwards.
func testBadArguments(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	buf := r.alloc(64, gpu.DeviceMem)
	other := r.alloc(64, gpu.DeviceMem)
	w := r.word()
	bad := []struct {
		name string
		cmd  gpu.Command
	}{
		{"nil command", nil},
		{"fill nil buffer", gpu.Fill{DType: gpu.Float32, N: 1, Value: gpu.Float(1)}},
		{"fill invalid dtype", gpu.Fill{Dst: buf, DType: gpu.Invalid, N: 1, Value: gpu.Float(1)}},
		{"fill unknown dtype", gpu.Fill{Dst: buf, DType: gpu.DType(200), N: 1, Value: gpu.Float(1)}},
		{"fill negative N", gpu.Fill{Dst: buf, DType: gpu.Float32, N: -1, Value: gpu.Float(1)}},
		{"fill out of range", gpu.Fill{Dst: buf, DType: gpu.Float32, N: 17, Value: gpu.Float(1)}},
		{"arange out of range", gpu.Arange{Dst: buf, DType: gpu.Float64, N: 9, Start: gpu.Int(0), Step: gpu.Int(1)}},
		{"arange nil buffer", gpu.Arange{DType: gpu.Int8, N: 1, Start: gpu.Int(0), Step: gpu.Int(1)}},
		{"copy nil src", gpu.Copy{Dst: buf, Bytes: 1}},
		{"copy nil dst", gpu.Copy{Src: buf, Bytes: 1}},
		{"copy negative size", gpu.Copy{Dst: buf, Src: other, Bytes: -1}},
		{"copy negative offset", gpu.Copy{Dst: buf, Src: other, SrcOff: -1, Bytes: 1}},
		{"copy source range", gpu.Copy{Dst: buf, Src: other, SrcOff: 60, Bytes: 8}},
		{"copy destination range", gpu.Copy{Dst: buf, DstOff: 57, Src: other, Bytes: 8}},
		{"copy overlapping", gpu.Copy{Dst: buf, DstOff: 4, Src: buf, SrcOff: 0, Bytes: 8}},
		{"add nil b", gpu.Add{Dst: buf, A: buf, DType: gpu.Int32, N: 1}},
		{"add out of range", gpu.Add{Dst: buf, A: buf, B: other, DType: gpu.Int64, N: 9}},
		{"add invalid dtype", gpu.Add{Dst: buf, A: buf, B: other, N: 1}},
		{"scale nil src", gpu.Scale{Dst: buf, DType: gpu.Int16, N: 1, Factor: gpu.Int(2)}},
		{"scale negative N", gpu.Scale{Dst: buf, Src: other, DType: gpu.Int16, N: -3, Factor: gpu.Int(2)}},
		{"wait nil word", gpu.WaitValue{Value: 1}},
		{"write nil word", gpu.WriteValue{Value: 1}},
	}
	for _, c := range bad {
		done := newCompletion()
		err := q.Submit([]gpu.Command{
			gpu.WriteValue{Word: w, Value: 1},
			gpu.Fill{Dst: other, DType: gpu.Int8, N: 64, Value: gpu.Int(9)},
			c.cmd,
		}, done.done)
		if err == nil {
			t.Errorf("%s: Submit accepted the batch", c.name)
			continue
		}
		expectErr(t, c.name, err, gpu.ErrBadArgument)
		if len(err.Error()) < 10 {
			t.Errorf("%s: uninformative error %q", c.name, err)
		}
		// The queue is in order: once a later batch completed, the refused
		// one would have run and called done if it had been queued.
		r.mustRun(q)
		if done.called() || w.Load() != 0 {
			t.Errorf("%s: refused batch ran (done called %v, word %d)", c.name, done.called(), w.Load())
		}
	}
	if got := r.read(q, other, 0, 64); got[0] != 0 {
		t.Errorf("a refused batch's fill ran: byte 0 = %d", got[0])
	}
	r.mustRun(q, gpu.Fill{Dst: buf, DType: gpu.Float32, N: 16, Value: gpu.Float(1)})
}
