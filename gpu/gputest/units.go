package gputest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// filled32 returns n int32 values v, little-endian, as a Fill of them leaves
// memory.
func filled32(n int, v int32) []byte {
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b
}

// testUnits: a batch of three units whose middle unit names a buffer
// freed before the batch was submitted. SubmitUnits accepts it (the stale
// buffer is that unit's fault alone), the batch waits behind an earlier
// WaitValue, and once released: unit 0 and unit 2 run completely, unit 1
// runs up to the failing command and skips the rest of itself; done gets
// a *gpu.BatchError naming unit 1 alone, wrapping ErrClosed; the queue
// goes on. A batch of units that all succeed completes with nil.
func testUnits(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	const n = 16
	fill := func(b gpu.Buffer, v int64) gpu.Command {
		return gpu.Fill{Dst: b, DType: gpu.Int32, N: n, Value: gpu.Int(v)}
	}
	gate, w0, w2 := r.word(), r.word(), r.word()
	a := r.alloc(4*n, gpu.DeviceMem)
	before := r.alloc(4*n, gpu.DeviceMem)
	after := r.alloc(4*n, gpu.DeviceMem)
	c := r.alloc(4*n, gpu.DeviceMem)
	src := r.alloc(4*n, gpu.HostMem)
	victim, err := r.dev.Alloc(4*n, gpu.DeviceMem)
	if err != nil {
		t.Fatalf("Alloc: %v", err)
	}
	if err := victim.Free(); err != nil {
		t.Fatalf("Free: %v", err)
	}

	hold := r.submit(q, gpu.WaitValue{Word: gate, Value: 1})
	batch := []gpu.Command{
		fill(a, 1), gpu.WriteValue{Word: w0, Value: 1}, // unit 0
		fill(before, 2), gpu.Copy{Dst: victim, Src: src, Bytes: 4 * n}, fill(after, 3), // unit 1
		fill(c, 4), gpu.WriteValue{Word: w2, Value: 1}, // unit 2
	}
	comp := newCompletion()
	if err := q.SubmitUnits(batch, []int{2, 5, 7}, comp.done); err != nil {
		t.Fatalf("SubmitUnits with a freed buffer in one unit: %v (want it accepted: the unit fails when it runs)", err)
	}
	gate.Store(1)
	if err := r.wait(hold); err != nil {
		t.Fatalf("holding batch: %v", err)
	}
	err = r.wait(comp)
	var be *gpu.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("done got %v (%T), want a *gpu.BatchError", err, err)
	}
	if len(be.Units) != 1 || be.Units[0].Unit != 1 || be.Units[0].Command != 3 {
		t.Errorf("failed units %+v, want unit 1 alone, at command 3", be.Units)
	}
	expectErr(t, "batch error", err, gpu.ErrClosed)
	for u, want := range []bool{false, true, false} {
		if got := gpu.UnitErr(err, u) != nil; got != want {
			t.Errorf("UnitErr(err, %d) = %v, want failed %v", u, gpu.UnitErr(err, u), want)
		}
	}
	for _, x := range []struct {
		name string
		b    gpu.Buffer
		v    int32
	}{
		{"unit 0's fill", a, 1},
		{"unit 1's fill before the failing command", before, 2},
		{"unit 1's fill after the failing command (skipped)", after, 0},
		{"unit 2's fill", c, 4},
	} {
		if got := r.read(q, x.b, 0, 4*n); !bytes.Equal(got, filled32(n, x.v)) {
			t.Errorf("%s: got % x, want every element %d", x.name, got[:8], x.v)
		}
	}
	if w0.Load() != 1 || w2.Load() != 1 {
		t.Errorf("units 0 and 2's writes: words %d and %d, want 1 and 1", w0.Load(), w2.Load())
	}

	ok := newCompletion()
	if err := q.SubmitUnits([]gpu.Command{fill(a, 5), fill(c, 6), gpu.WriteValue{Word: w2, Value: 2}},
		[]int{1, 3}, ok.done); err != nil {
		t.Fatalf("SubmitUnits: %v", err)
	}
	if err := r.wait(ok); err != nil {
		t.Fatalf("a batch of units that all succeed: %v", err)
	}
	if got := r.read(q, c, 0, 4*n); !bytes.Equal(got, filled32(n, 6)) || w2.Load() != 2 {
		t.Errorf("after the units batch: c % x, word %d", got[:8], w2.Load())
	}
}

// testUnitsBadEnds: SubmitUnits refuses ends that do not split the batch
// into non-empty units covering it, with an error wrapping ErrBadArgument,
// runs nothing and never calls done; empty ends make one unit.
func testUnitsBadEnds(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	w := r.word()
	cmds := []gpu.Command{
		gpu.WriteValue{Word: w, Value: 1},
		gpu.WriteValue{Word: w, Value: 2},
		gpu.WriteValue{Word: w, Value: 3},
	}
	for _, ends := range [][]int{{0, 3}, {2, 2, 3}, {2}, {1, 4}, {3, 1}, {-1, 3}} {
		done := newCompletion()
		err := q.SubmitUnits(cmds, ends, done.done)
		if err == nil {
			t.Errorf("ends %v: SubmitUnits accepted them", ends)
			continue
		}
		expectErr(t, "bad ends", err, gpu.ErrBadArgument)
		r.mustRun(q)
		if done.called() || w.Load() != 0 {
			t.Errorf("ends %v: refused batch ran (done called %v, word %d)", ends, done.called(), w.Load())
		}
	}
	for _, ends := range [][]int{nil, {}, {3}, {1, 2, 3}} {
		done := newCompletion()
		if err := q.SubmitUnits(cmds, ends, done.done); err != nil {
			t.Fatalf("ends %v: %v", ends, err)
		}
		if err := r.wait(done); err != nil {
			t.Errorf("ends %v: %v", ends, err)
		}
	}
	if w.Load() != 3 {
		t.Errorf("word %d, want 3", w.Load())
	}
}

// testDonePanics: a done callback that panics, for a batch that succeeded
// or failed, neither kills the process nor stops the queue: the batches
// after it complete, and Close returns nil.
func testDonePanics(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	w := r.word()
	gone, err := r.dev.NewFenceWord()
	if err != nil {
		t.Fatalf("NewFenceWord: %v", err)
	}
	gone.Free()
	if err := q.Submit([]gpu.Command{gpu.WriteValue{Word: w, Value: 1}},
		func(error) { panic("gputest: a done callback panics") }); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if err := q.SubmitUnits([]gpu.Command{gpu.WriteValue{Word: w, Value: 2}, gpu.WriteValue{Word: gone, Value: 1}},
		[]int{1, 2}, func(error) { panic("gputest: a failed batch's done panics") }); err != nil {
		t.Fatalf("SubmitUnits: %v", err)
	}
	r.mustRun(q, gpu.WriteValue{Word: w, Value: 3})
	if v := w.Load(); v != 3 {
		t.Errorf("word %d after the batches, want 3", v)
	}
	if err := q.Close(r.ctx()); err != nil {
		t.Errorf("Close after done callbacks panicked: %v", err)
	}
}
