package sim_test

// Fuzz target for the sim queue's batches of units (SubmitUnits): what a
// stream hands the device on behalf of many callers. Run with:
//
//	go test -run='^$' -fuzz='^FuzzSubmitUnits$' -fuzztime=30s ./gpu/sim

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/sim"
)

// FuzzSubmitUnits: a batch of fills and copies over a few host buffers
// (some freed before the call, one of another device), cut into units by
// any ends. The call refuses at once exactly what ValidateUnits refuses, a
// foreign buffer, and (with no ends: one unit) a freed buffer; otherwise
// done runs exactly once, a unit stops at its first command on a freed
// buffer and reports it (UnitErr), and every other command runs, in
// order, as a model of the batch computes. A done that panics does not
// stop the queue.
func FuzzSubmitUnits(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, []byte{1, 4}, uint8(0), false)
	f.Add([]byte{0, 1, 2, 3}, []byte{2, 4}, uint8(1<<1), false)   // buffer 1 freed: unit 0 fails, unit 1 runs
	f.Add([]byte{0x11, 0x20, 0x33}, []byte{}, uint8(1<<2), false) // one unit with a freed buffer: refused
	f.Add([]byte{0, 1}, []byte{1, 1}, uint8(0), false)            // an empty unit
	f.Add([]byte{0, 1}, []byte{3}, uint8(0), false)               // past the end
	f.Add([]byte{0, 4, 1}, []byte{1, 2, 3}, uint8(0), true)       // a foreign buffer
	f.Add([]byte{0x40, 0x10, 0x01}, []byte{1, 3}, uint8(1), true) // copies, a panicking done
	dev, err := sim.New()
	if err != nil {
		f.Fatal(err)
	}
	other, err := sim.New()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		_ = dev.Close()
		_ = other.Close()
	})
	q, err := dev.NewQueue()
	if err != nil {
		f.Fatal(err)
	}
	const nbuf, blen = 4, 8
	f.Fuzz(func(t *testing.T, prog, rawEnds []byte, freedMask uint8, panicky bool) {
		if len(prog) > 32 || len(rawEnds) > 33 {
			return
		}
		bufs := make([]gpu.Buffer, nbuf+1)
		var err error
		for i := range nbuf {
			if bufs[i], err = dev.Alloc(blen, gpu.HostMem); err != nil {
				t.Fatal(err)
			}
		}
		if bufs[nbuf], err = other.Alloc(blen, gpu.HostMem); err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, b := range bufs {
				_ = b.Free()
			}
		}()
		freed := func(i int) bool { return i < nbuf && freedMask&(1<<i) != 0 }
		for i := range nbuf {
			if freed(i) {
				_ = bufs[i].Free()
			}
		}
		// Commands: a byte each; the low bits pick the destination, the
		// next ones a source for a copy (else a fill with its index + 1).
		// Index 4 is the foreign buffer.
		type op struct {
			dst, src int // src < 0: fill
			val      byte
		}
		var ops []op
		var batch []gpu.Command
		foreign := false
		for i, c := range prog {
			o := op{dst: int(c&7) % (nbuf + 1), src: -1, val: byte(i + 1)}
			if c&0x40 != 0 {
				o.src = int(c>>3&7) % (nbuf + 1)
				if o.src == o.dst {
					o.src = (o.src + 1) % nbuf
				}
			}
			foreign = foreign || o.dst == nbuf || o.src == nbuf
			ops = append(ops, o)
			if o.src < 0 {
				batch = append(batch, gpu.Fill{Dst: bufs[o.dst], DType: gpu.Uint8, N: blen, Value: gpu.Int(int64(o.val))})
			} else {
				batch = append(batch, gpu.Copy{Dst: bufs[o.dst], Src: bufs[o.src], Bytes: blen})
			}
		}
		var ends []int
		for _, e := range rawEnds {
			ends = append(ends, int(e))
		}
		unitsOK := gpu.ValidateUnits(len(batch), ends) == nil
		freedAny := slices.ContainsFunc(ops, func(o op) bool { return freed(o.dst) || o.src >= 0 && freed(o.src) })
		var calls atomic.Int32
		doneCh := make(chan error, 1)
		err = q.SubmitUnits(batch, ends, func(err error) {
			calls.Add(1)
			doneCh <- err
			if panicky {
				panic("a caller's bug")
			}
		})
		switch {
		case !unitsOK || foreign || len(ends) == 0 && freedAny:
			if err == nil {
				t.Fatalf("SubmitUnits(%v, ends %v, freed %04b) accepted; want it refused at once (units ok %v, foreign %v)", ops, ends, freedMask, unitsOK, foreign)
			}
			if !errors.Is(err, gpu.ErrBadArgument) && !errors.Is(err, gpu.ErrClosed) {
				t.Fatalf("SubmitUnits refused with %v, want ErrBadArgument or ErrClosed", err)
			}
			return
		case err != nil:
			t.Fatalf("SubmitUnits(%v, ends %v, freed %04b): %v", ops, ends, freedMask, err)
		}
		var derr error
		select {
		case derr = <-doneCh:
		case <-time.After(10 * time.Second):
			t.Fatal("done never called")
		}
		// The model: run the units; a command on a freed buffer ends its unit.
		if len(ends) == 0 {
			ends = []int{len(ops)}
		}
		var want [nbuf][blen]byte
		lo := 0
		for u, hi := range ends {
			failedAt := -1
			for i := lo; i < hi; i++ {
				o := ops[i]
				if freed(o.dst) || o.src >= 0 && freed(o.src) {
					failedAt = i
					break
				}
				if o.src < 0 {
					for j := range want[o.dst] {
						want[o.dst][j] = o.val
					}
				} else {
					want[o.dst] = want[o.src]
				}
			}
			uerr := gpu.UnitErr(derr, u)
			if (failedAt >= 0) != (uerr != nil) {
				t.Fatalf("ops %v ends %v freed %04b: unit %d [%d, %d): UnitErr = %v, want a failure: %v (done got %v)",
					ops, ends, freedMask, u, lo, hi, uerr, failedAt >= 0, derr)
			}
			if uerr != nil && !errors.Is(uerr, gpu.ErrClosed) {
				t.Fatalf("unit %d failed with %v, want ErrClosed (a freed buffer)", u, uerr)
			}
			lo = hi
		}
		for i := range nbuf {
			if freed(i) {
				continue
			}
			if got := bufs[i].Bytes(); !slices.Equal(got, want[i][:]) {
				t.Fatalf("ops %v ends %v freed %04b: buffer %d = %v, want %v", ops, ends, freedMask, i, got, want[i])
			}
		}
		// The queue goes on, whatever done did.
		next := make(chan error, 1)
		if err := q.Submit(nil, func(err error) { next <- err }); err != nil {
			t.Fatalf("submit after the batch: %v", err)
		}
		select {
		case err := <-next:
			if err != nil {
				t.Fatalf("the batch after: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the queue stopped after a done that panicked")
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("done called %d times", n)
		}
	})
}
