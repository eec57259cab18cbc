package gputest

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// peerOps are the reductions PeerReduce is checked with.
var peerOps = []gpu.ReduceOp{gpu.OpSum, gpu.OpProd, gpu.OpMin, gpu.OpMax}

// testPeerReduce checks a PeerDevice's PeerReduce for every dtype and op:
// 1 to 4 sources through a table, offsets, several destinations (one of
// them a source: in place), an unarmed table (nothing written) and a too
// short entry (nothing written, the table's Err set). Devices without
// PeerDevice skip it.
func testPeerReduce(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	pd, ok := r.dev.(gpu.PeerDevice)
	if !ok {
		t.Skipf("%s has no peer tables", r.dev.Properties().Backend)
	}
	q := r.queue()
	for _, dt := range gpu.DTypes {
		for _, op := range peerOps {
			for _, n := range []int{1, 1000, 70001} {
				t.Run(fmt.Sprintf("%v/%v/N=%d", dt, op, n), func(t *testing.T) {
					checkPeerReduce(&rig{t: t, dev: r.dev}, pd, q, dt, op, n)
				})
			}
		}
	}
	t.Run("Unarmed", func(t *testing.T) { checkPeerUnarmed(&rig{t: t, dev: r.dev}, pd, q) })
}

func newTable(r *rig, pd gpu.PeerDevice, bufs ...gpu.Buffer) gpu.PeerTable {
	r.t.Helper()
	tab, err := pd.NewPeerTable(len(bufs))
	if err != nil {
		r.t.Fatalf("NewPeerTable: %v", err)
	}
	r.t.Cleanup(func() { _ = tab.Free() })
	for i, b := range bufs {
		if err := tab.Set(i, b); err != nil {
			r.t.Fatalf("Set(%d): %v", i, err)
		}
	}
	return tab
}

func checkPeerReduce(r *rig, pd gpu.PeerDevice, q gpu.Queue, dt gpu.DType, op gpu.ReduceOp, n int) {
	es := dt.Size()
	rng := rand.New(rand.NewPCG(uint64(dt)*7+uint64(op), uint64(n)))
	const srcs, off = 4, 3 // sources read from element off
	ins := make([][]byte, srcs)
	bufs := make([]gpu.Buffer, 0, srcs+2)
	for i := range ins {
		ins[i] = randomElems(rng, dt, n+off)
		bufs = append(bufs, r.upload(q, ins[i], gpu.DeviceMem))
	}
	outA := r.alloc((n+2)*es, gpu.DeviceMem)
	outB := r.alloc((n+2)*es, gpu.DeviceMem)
	bufs = append(bufs, outA, outB)
	tab := newTable(r, pd, bufs...)
	tab.Arm()
	// k sources into outA and outB at element 1; then in place: sources
	// 0..3 into sources 2 and 3 at off (both sources themselves).
	for k := 1; k <= srcs; k++ {
		r.mustRun(q, gpu.PeerReduce{Table: tab, SrcLo: 0, SrcHi: k, DstLo: srcs, DstHi: srcs + 2,
			SrcOff: off, DstOff: 1, N: n, DType: dt, Op: op})
		for _, out := range []gpu.Buffer{outA, outB} {
			got := r.read(q, out, 0, out.Len())
			checkElems(r.t, fmt.Sprintf("%d sources", k), dt, got[es:(n+1)*es], n, func(i int) (int64, float64) {
				return refReduce(dt, op, ins[:k], off+i)
			})
		}
	}
	// Offsets 0: every entry aligned alike (a kernel may take a faster
	// path there; the result must not change).
	r.mustRun(q, gpu.PeerReduce{Table: tab, SrcLo: 0, SrcHi: srcs, DstLo: srcs, DstHi: srcs + 2,
		N: n + 1, DType: dt, Op: op})
	for _, out := range []gpu.Buffer{outA, outB} {
		got := r.read(q, out, 0, (n+1)*es)
		checkElems(r.t, "aligned", dt, got, n+1, func(i int) (int64, float64) { return refReduce(dt, op, ins, i) })
	}
	r.mustRun(q, gpu.PeerReduce{Table: tab, SrcLo: 0, SrcHi: srcs, DstLo: 2, DstHi: 4,
		SrcOff: off, DstOff: off, N: n, DType: dt, Op: op})
	for _, b := range bufs[2:4] {
		got := r.read(q, b, off*es, n*es)
		checkElems(r.t, "in place", dt, got, n, func(i int) (int64, float64) { return refReduce(dt, op, ins, off+i) })
	}
	if err := tab.Err(); err != nil {
		r.t.Fatalf("table Err after good commands: %v", err)
	}
}

// refReduce is element i of the sources reduced in order: floats in their
// own precision (16-bit ones in float32; the comparison allows the
// dtype's rounding), integers in int64, wrapped to the dtype.
func refReduce(dt gpu.DType, op gpu.ReduceOp, ins [][]byte, i int) (int64, float64) {
	if !dt.IsFloat() {
		acc := dt.Int(ins[0], i)
		for _, in := range ins[1:] {
			v := dt.Int(in, i)
			switch op {
			case gpu.OpSum:
				acc = int64(uint64(acc) + uint64(v))
			case gpu.OpProd:
				acc = int64(uint64(acc) * uint64(v))
			case gpu.OpMin:
				acc = min(acc, v)
			case gpu.OpMax:
				acc = max(acc, v)
			}
		}
		return dt.Wrap(acc), 0
	}
	single := dt != gpu.Float64
	acc := dt.Float(ins[0], i)
	for _, in := range ins[1:] {
		v := dt.Float(in, i)
		switch op {
		case gpu.OpSum:
			acc += v
		case gpu.OpProd:
			acc *= v
		case gpu.OpMin:
			if math.IsNaN(acc) || math.IsNaN(v) {
				acc = math.NaN()
			} else {
				acc = math.Min(acc, v)
			}
		case gpu.OpMax:
			if math.IsNaN(acc) || math.IsNaN(v) {
				acc = math.NaN()
			} else {
				acc = math.Max(acc, v)
			}
		}
		if single {
			acc = float64(float32(acc))
		}
	}
	if dt.Size() == 2 { // the one rounding to 16 bits (to infinity past the range)
		b := make([]byte, 2)
		dt.SetFloat(b, 0, acc)
		acc = dt.Float(b, 0)
	}
	return 0, acc
}

// checkPeerUnarmed: an unarmed table makes a PeerReduce write nothing; an
// armed one with a too short entry writes nothing and sets Err.
func checkPeerUnarmed(r *rig, pd gpu.PeerDevice, q gpu.Queue) {
	dt, n := gpu.Int32, 64
	src := r.upload(q, randomElems(rand.New(rand.NewPCG(1, 2)), dt, n), gpu.DeviceMem)
	dst := r.alloc(n*4, gpu.DeviceMem)
	tab := newTable(r, pd, src, dst)
	r.mustRun(q, gpu.PeerReduce{Table: tab, SrcLo: 0, SrcHi: 1, DstLo: 1, DstHi: 2, N: n, DType: dt, Op: gpu.OpSum})
	if got := r.read(q, dst, 0, n*4); !bytes.Equal(got, make([]byte, n*4)) {
		r.t.Fatal("an unarmed table's command wrote its destination")
	}
	short := r.alloc(n*4-4, gpu.DeviceMem)
	tab2 := newTable(r, pd, src, short, dst)
	tab2.Arm()
	r.mustRun(q, gpu.PeerReduce{Table: tab2, SrcLo: 0, SrcHi: 2, DstLo: 2, DstHi: 3, N: n, DType: dt, Op: gpu.OpSum})
	if got := r.read(q, dst, 0, n*4); !bytes.Equal(got, make([]byte, n*4)) {
		r.t.Fatal("a command with a too short source wrote its destination")
	}
	// One source is a copy, bit for bit, also of NaN payloads that a float
	// round trip would quiet.
	for _, dt := range gpu.DTypes {
		bits := make([]byte, 64*dt.Size())
		for i := range bits {
			bits[i] = byte(i*37 + 1)
		}
		for i := 0; i+1 < len(bits); i += 2 { // signaling NaNs of both 16-bit kinds
			if i%8 == 0 {
				bits[i], bits[i+1] = 0x01, 0x7c
			} else if i%8 == 2 {
				bits[i], bits[i+1] = 0x81, 0x7f
			}
		}
		src := r.upload(q, bits, gpu.DeviceMem)
		dst := r.alloc(len(bits), gpu.DeviceMem)
		tab := newTable(r, pd, src, dst)
		tab.Arm()
		r.mustRun(q, gpu.PeerReduce{Table: tab, SrcLo: 0, SrcHi: 1, DstLo: 1, DstHi: 2, N: 64, DType: dt, Op: gpu.OpProd})
		if got := r.read(q, dst, 0, len(bits)); !bytes.Equal(got, bits) {
			r.t.Fatalf("%v: a one-source PeerReduce changed bits", dt)
		}
	}
	if tab2.Err() == nil {
		r.t.Fatal("a too short entry left the table's Err nil")
	}
	if err := tab2.Set(0, src); err == nil {
		r.t.Fatal("Set after Arm succeeded")
	}
}
