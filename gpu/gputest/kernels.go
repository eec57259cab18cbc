package gputest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// kernelSizes are the element counts every kernel is checked at.
var kernelSizes = []int{0, 1, 7, 1024 + 3}

// kernelCase is one kernel command with its expected element i.
type kernelCase struct {
	name   string
	cmd    func(dst gpu.Buffer) gpu.Command
	expect func(i int) (int64, float64)
}

// testKernels: fill, arange, add and scale on every dtype and size agree
// with the reference (reference.go), and write nothing past N elements.
func testKernels(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	for _, dt := range gpu.DTypes {
		for _, n := range kernelSizes {
			t.Run(fmt.Sprintf("%v/N=%d", dt, n), func(t *testing.T) {
				rr := &rig{t: t, dev: r.dev}
				checkKernels(rr, q, dt, n)
			})
		}
	}
}

func checkKernels(r *rig, q gpu.Queue, dt gpu.DType, n int) {
	size := dt.Size()
	rng := rand.New(rand.NewPCG(uint64(dt), uint64(n)))
	inA, inB := randomElems(rng, dt, n), randomElems(rng, dt, n)
	a := r.upload(q, inA, gpu.DeviceMem)
	b := r.upload(q, inB, gpu.DeviceMem)

	var cases []kernelCase
	for _, v := range []gpu.Scalar{gpu.Int(-3), gpu.Int(300), gpu.Float(-2.75), gpu.Float(1000.5)} {
		cases = append(cases, kernelCase{
			name:   "fill " + v.String(),
			cmd:    func(d gpu.Buffer) gpu.Command { return gpu.Fill{Dst: d, DType: dt, N: n, Value: v} },
			expect: func(int) (int64, float64) { return refFill(dt, v) },
		})
	}
	for _, ss := range [][2]gpu.Scalar{
		{gpu.Int(-5), gpu.Int(3)},
		{gpu.Float(0.5), gpu.Float(-0.25)},
		{gpu.Int(7), gpu.Float(0.5)},
		{gpu.Float(-2.7), gpu.Float(1.3)},
	} {
		cases = append(cases, kernelCase{
			name: fmt.Sprintf("arange %v %v", ss[0], ss[1]),
			cmd: func(d gpu.Buffer) gpu.Command {
				return gpu.Arange{Dst: d, DType: dt, N: n, Start: ss[0], Step: ss[1]}
			},
			expect: func(i int) (int64, float64) { return refArange(dt, i, ss[0], ss[1]) },
		})
	}
	cases = append(cases, kernelCase{
		name:   "add",
		cmd:    func(d gpu.Buffer) gpu.Command { return gpu.Add{Dst: d, A: a, B: b, DType: dt, N: n} },
		expect: func(i int) (int64, float64) { return refAdd(dt, inA, inB, i) },
	})
	for _, f := range []gpu.Scalar{gpu.Int(3), gpu.Int(-2), gpu.Float(-1.5), gpu.Float(0.3)} {
		cases = append(cases, kernelCase{
			name:   "scale " + f.String(),
			cmd:    func(d gpu.Buffer) gpu.Command { return gpu.Scale{Dst: d, Src: a, DType: dt, N: n, Factor: f} },
			expect: func(i int) (int64, float64) { return refScale(dt, inA, i, f) },
		})
	}

	// One batch runs every case into its own buffer, two elements longer
	// than N so writes past the end show.
	outs := make([]gpu.Buffer, len(cases))
	cmds := make([]gpu.Command, len(cases))
	for i, c := range cases {
		outs[i] = r.alloc((n+2)*size, gpu.DeviceMem) // cleared by the rig
		cmds[i] = c.cmd(outs[i])
	}
	r.mustRun(q, cmds...)
	for i, c := range cases {
		got := r.read(q, outs[i], 0, outs[i].Len())
		checkElems(r.t, c.name, dt, got[:n*size], n, c.expect)
		if tail := got[n*size:]; !bytes.Equal(tail, make([]byte, len(tail))) {
			r.t.Errorf("%s: wrote past element %d", c.name, n)
		}
	}
}

// checkElems compares n elements of got with expect, reporting at most a
// few mismatches.
func checkElems(t *testing.T, name string, dt gpu.DType, got []byte, n int, expect func(i int) (int64, float64)) {
	t.Helper()
	bad := 0
	for i := range n {
		wi, wf := expect(i)
		if dt.IsFloat() {
			if g := dt.Float(got, i); !closeEnough(dt, g, wf) {
				t.Errorf("%s %v: element %d = %v, want %v (tolerance %g)", name, dt, i, g, wf, tolerance(dt))
				bad++
			}
		} else if g := dt.Int(got, i); g != wi {
			t.Errorf("%s %v: element %d = %d, want %d", name, dt, i, g, wi)
			bad++
		}
		if bad >= 5 {
			t.Errorf("%s %v: stopping after %d mismatches", name, dt, bad)
			return
		}
	}
}

// randomElems returns n random elements of dt: any bit pattern for integer
// types (so sums and products wrap), multiples of 1/64 in [-100, 100] for
// float types.
func randomElems(rng *rand.Rand, dt gpu.DType, n int) []byte {
	b := make([]byte, n*dt.Size())
	if !dt.IsFloat() {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for i := range n {
		dt.SetFloat(b, i, float64(rng.IntN(12801)-6400)/64)
	}
	return b
}

// testKernelAliasing: Add and Scale may write into one of their inputs.
func testKernelAliasing(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	const n = 257
	for _, dt := range []gpu.DType{gpu.Int32, gpu.Float32, gpu.Float16} {
		rng := rand.New(rand.NewPCG(7, uint64(dt)))
		inA, inB := randomElems(rng, dt, n), randomElems(rng, dt, n)
		a := r.upload(q, inA, gpu.DeviceMem)
		b := r.upload(q, inB, gpu.DeviceMem)
		r.mustRun(q, gpu.Add{Dst: a, A: a, B: b, DType: dt, N: n})
		sum := r.read(q, a, 0, n*dt.Size())
		checkElems(t, "add into a", dt, sum, n, func(i int) (int64, float64) { return refAdd(dt, inA, inB, i) })

		r.mustRun(q, gpu.Add{Dst: b, A: a, B: b, DType: dt, N: n})
		sum2 := r.read(q, b, 0, n*dt.Size())
		checkElems(t, "add into b", dt, sum2, n, func(i int) (int64, float64) { return refAdd(dt, sum, inB, i) })

		r.mustRun(q, gpu.Scale{Dst: b, Src: b, DType: dt, N: n, Factor: gpu.Int(-1)})
		neg := r.read(q, b, 0, n*dt.Size())
		checkElems(t, "scale in place", dt, neg, n, func(i int) (int64, float64) { return refScale(dt, sum2, i, gpu.Int(-1)) })

		r.mustRun(q, gpu.Add{Dst: a, A: a, B: a, DType: dt, N: n})
		dbl := r.read(q, a, 0, n*dt.Size())
		checkElems(t, "add a to itself", dt, dbl, n, func(i int) (int64, float64) { return refAdd(dt, sum, sum, i) })
	}
}
