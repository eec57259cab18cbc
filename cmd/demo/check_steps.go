package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
)

// matrix runs the steps of the matrix of ops, dtypes and sizes; every rank
// runs the same steps in the same order.
func (k *checker) matrix() {
	for _, dt := range gpu.DTypes {
		for _, op := range []collectives.Op{collectives.Sum, collectives.Min, collectives.Max, collectives.Prod} {
			for _, count := range []int{1, 7, 10, 1024} {
				k.allReduce(dt, op, count)
			}
		}
	}
	k.allReduce(gpu.Float32, collectives.Sum, 1024*1024)
	for _, dt := range []gpu.DType{gpu.Float32, gpu.Int8, gpu.BFloat16} {
		for _, count := range []int{1, 7, 1024} {
			k.allGather(dt, count)
			k.broadcast(dt, count, 0)
			k.broadcast(dt, count, k.g.Size()-1)
			k.sendRecv(dt, count)
		}
	}
	for _, per := range []int{1, 7, 256} {
		k.reduceScatter(gpu.Int32, per*k.g.Size())
	}
	k.exchange()
	if k.broken {
		return
	}
	ctx, cancel := k.ctx()
	defer cancel()
	if err := k.g.Barrier(ctx); err != nil {
		k.fail("barrier", err)
	} else {
		k.pass("barrier")
	}
}

// step runs one collective on this rank's input of count elements of dt
// (a product's input for op Prod) and checks its output against want,
// computed from every rank's input.
func (k *checker) step(name string, dt gpu.DType, op collectives.Op, count int,
	run func(x *array.Array) (*array.Array, error), want func(ins [][]float64) []float64) {
	if k.broken {
		return
	}
	ins, err := k.inputs(count, dt, op)
	if err != nil {
		k.fail(name, err)
		return
	}
	x, err := k.input(k.g.Rank(), count, dt, op)
	var y *array.Array
	if err == nil {
		y, err = run(x)
		_ = x.Free() // the collective holds its own share while it reads
	}
	k.expect(name, dt, y, err, want(ins))
}

// allReduce checks one all-reduce.
func (k *checker) allReduce(dt gpu.DType, op collectives.Op, count int) {
	k.step(fmt.Sprintf("allreduce/%s/%s/%d", dt, op, count), dt, op, count,
		func(x *array.Array) (*array.Array, error) { return k.g.AllReduce(k.s, x, op) },
		func(ins [][]float64) []float64 { return reduce(dt, op, ins) })
}

// allGather checks one all-gather: every rank's input, in rank order.
func (k *checker) allGather(dt gpu.DType, count int) {
	k.step(fmt.Sprintf("allgather/%s/%d", dt, count), dt, collectives.Sum, count,
		func(x *array.Array) (*array.Array, error) { return k.g.AllGather(k.s, x) },
		func(ins [][]float64) []float64 {
			var want []float64
			for _, in := range ins {
				want = append(want, in...)
			}
			return want
		})
}

// broadcast checks one broadcast from root.
func (k *checker) broadcast(dt gpu.DType, count, root int) {
	k.step(fmt.Sprintf("broadcast/%s/%d/root%d", dt, count, root), dt, collectives.Sum, count,
		func(x *array.Array) (*array.Array, error) { return k.g.Broadcast(k.s, x, root) },
		func(ins [][]float64) []float64 { return ins[root] })
}

// reduceScatter checks one reduce-scatter of count elements (a multiple
// of the group's size): this rank's block of the sum.
func (k *checker) reduceScatter(dt gpu.DType, count int) {
	per, r := count/k.g.Size(), k.g.Rank()
	k.step(fmt.Sprintf("reducescatter/%s/%d", dt, count), dt, collectives.Sum, count,
		func(x *array.Array) (*array.Array, error) { return k.g.ReduceScatter(k.s, x, collectives.Sum) },
		func(ins [][]float64) []float64 { return reduce(dt, collectives.Sum, ins)[r*per : (r+1)*per] })
}

// sendRecv checks one step around the ring: each rank sends its input to
// its right neighbour and receives its left neighbour's.
func (k *checker) sendRecv(dt gpu.DType, count int) {
	n, r := k.g.Size(), k.g.Rank()
	step := fmt.Sprintf("sendrecv/%s/%d", dt, count)
	if n == 1 || k.broken {
		return
	}
	ins, err := k.inputs(count, dt, collectives.Sum)
	if err != nil {
		k.fail(step, err)
		return
	}
	x, err := k.input(r, count, dt, collectives.Sum)
	if err == nil {
		err = k.g.Send(k.s, x, (r+1)%n)
	}
	var y *array.Array
	if err == nil {
		y, err = k.g.Recv(k.s, []int{count}, dt, (r+n-1)%n)
	}
	if err == nil {
		ctx, cancel := k.ctx()
		err = k.g.Wait(ctx)
		cancel()
	}
	if x != nil {
		_ = x.Free()
	}
	k.expect(step, dt, y, err, ins[(r+n-1)%n])
}

// expect reads y (unless err) and compares it with want.
func (k *checker) expect(step string, dt gpu.DType, y *array.Array, err error, want []float64) {
	var got []float64
	if err == nil {
		got, err = k.values(y)
	}
	if err == nil {
		err = compare(dt, got, want)
	}
	if err != nil {
		k.fail(step, err)
		return
	}
	k.pass(step)
}

// soak all-reduces size bytes iters times, printing "SOAK <k>" after
// each, until the first failure.
func (k *checker) soak(size, iters int) {
	count := max(size/4, 1)
	want := float64(k.g.Size() * (k.g.Size() + 1) / 2)
	for i := range iters {
		t0 := time.Now()
		x, err := array.Full(k.s, []int{count}, gpu.Float32, float64(k.g.Rank()+1))
		var y *array.Array
		if err == nil {
			y, err = k.g.AllReduce(k.s, x, collectives.Sum, collectives.Donate())
		}
		var got []float64
		if err == nil {
			got, err = k.values(y)
		}
		if err == nil && (got[0] != want || got[count-1] != want) {
			err = fmt.Errorf("iteration %d: %v...%v, want %v", i, got[0], got[count-1], want)
		}
		if err != nil {
			k.fail(fmt.Sprintf("soak/%d after=%v", i, time.Since(t0).Round(time.Millisecond)), err)
			return
		}
		fmt.Printf("SOAK %d\n", i)
	}
	k.pass("soak")
}

// mismatch all-reduces 100+rank elements: every rank must fail with
// ErrShapeMismatch.
func (k *checker) mismatch() {
	x, err := array.Full(k.s, []int{100 + k.g.Rank()}, gpu.Float32, 1)
	var y *array.Array
	if err == nil {
		y, err = k.g.AllReduce(k.s, x, collectives.Sum, collectives.Donate())
	}
	if err == nil {
		_, err = k.values(y)
	}
	k.mismatched("mismatch", err)
}

// mismatched passes step when err is ErrShapeMismatch.
func (k *checker) mismatched(step string, err error) {
	switch {
	case errors.Is(err, collectives.ErrShapeMismatch):
		k.pass(step)
	case err == nil:
		k.fail(step, errors.New("mismatched shapes exchanged without an error"))
	default:
		k.fail(step, err)
	}
}
