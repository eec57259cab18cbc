package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
)

// result is one row of the sweep.
type result struct {
	batch, p50   time.Duration
	algbw, busbw float64
	wrong        int64 // over every rank
	// allocs is the driver allocations per timed op in this process, -1
	// where the device does not count them.
	allocs float64
}

// window is how many ops a batch keeps in flight (each op's output is a
// new array, so an unbounded batch would hold them all).
const window = 2

// opRun is one op at one size on a world's held ranks.
type opRun struct {
	w       *world
	op      string
	dt      gpu.DType
	count   int
	inputs  []*array.Array
	inplace bool // the outputs are the inputs, donated again by the next op
}

// measure runs op at count elements per rank on w's held ranks: a
// correctness check (every rank's wrong elements added up), warm-up, then
// a per-op latency (one op, wait, next) and nccl-tests' batch timing
// (timed ops back to back, mean), each after a barrier. The times are
// this process's, until all its held ranks are done.
func (f *benchFlags) measure(w *world, op string, dt gpu.DType, count int) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := &opRun{w: w, op: op, dt: dt, count: count, inputs: make([]*array.Array, len(w.groups)), inplace: op == "allreduce_inplace"}
	for i := range w.groups {
		var err error
		r := w.groups[i].Rank()
		if exchangeOp(op) {
			o.inputs[i], err = array.Full(w.s[i], exchangeInputShape(op, w.size, count), dt, float64(r+1))
		} else {
			o.inputs[i], err = array.Arange(w.s[i], count, dt, float64(r%3), 0)
		}
		if err != nil {
			return result{}, err
		}
	}
	defer freeAll(o.inputs)
	outs, err := o.once()
	if err == nil {
		err = o.wait(ctx, outs)
	}
	var wrong []int64
	if err == nil {
		wrong, err = o.check(ctx, outs)
	}
	if err != nil {
		return result{}, err
	}
	o.free(outs)
	perRank := make([][]int64, len(wrong))
	for i, n := range wrong {
		perRank[i] = []int64{n}
	}
	total, err := w.sum(ctx, perRank)
	if err != nil {
		return result{}, err
	}
	warm, timed := iterations(count * dt.Size())
	if f.Iters > 0 {
		timed = f.Iters
	}
	if err := o.batch(ctx, max(warm, 2*window)); err != nil {
		return result{}, err
	}
	lat, err := o.latencies(ctx, timed)
	if err != nil {
		return result{}, err
	}
	if err := w.barrier(ctx); err != nil {
		return result{}, err
	}
	allocs0 := driverAllocs(w.dev)
	t0 := time.Now()
	if err := o.batch(ctx, timed); err != nil {
		return result{}, err
	}
	perOp := time.Since(t0) / time.Duration(timed)
	allocs := -1.0
	if allocs0 >= 0 {
		allocs = float64(driverAllocs(w.dev)-allocs0) / float64(timed)
	}
	bytes := float64(count * dt.Size())
	if op == "allgather" || op == "gather" || op == "scatter" {
		bytes *= float64(w.size) // nccl-tests: the size of the gathered output (the scattered input)
	}
	algbw := bytes / perOp.Seconds() / 1e9
	return result{batch: perOp, p50: lat, algbw: algbw, busbw: algbw * busFactor(op, w.size), wrong: total[0], allocs: allocs}, nil
}

// driverAllocs is dev's count of driver allocations, or -1 where it keeps
// none.
func driverAllocs(dev gpu.Device) int64 {
	if c, ok := dev.(gpu.AllocCounter); ok {
		return int64(c.DriverAllocs())
	}
	return -1
}

// latencies times n ops one at a time (start, wait, next), after a
// barrier, and returns the median.
func (o *opRun) latencies(ctx context.Context, n int) (time.Duration, error) {
	if err := o.w.barrier(ctx); err != nil {
		return 0, err
	}
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		outs, err := o.once()
		if err == nil {
			err = o.wait(ctx, outs)
		}
		if err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(t0))
		o.free(outs)
	}
	return median(lat), nil
}

// once starts the op on every held rank (each call returns at once: the
// work happens on the ranks' streams) and returns each one's output.
func (o *opRun) once() ([]*array.Array, error) {
	outs := make([]*array.Array, len(o.w.groups))
	for i := range o.w.groups {
		var err error
		if outs[i], err = o.start(i); err != nil {
			return nil, err
		}
		if o.inplace {
			o.inputs[i] = outs[i]
		}
	}
	return outs, nil
}

// start starts the op on held rank i. sendrecv is a ring: each rank sends
// to the next and receives from the one before; even ranks send first and
// odd ranks receive first, so that a rank's comm stream, which runs one
// task at a time, never waits on a send that waits on it.
func (o *opRun) start(i int) (*array.Array, error) {
	g, s, x := o.w.groups[i], o.w.s[i], o.inputs[i]
	switch o.op {
	case "allreduce":
		return g.AllReduce(s, x, collectives.Sum)
	case "allreduce_inplace": // the output takes over the input's buffer
		return g.AllReduce(s, x, collectives.Sum, collectives.Donate())
	case "allgather":
		return g.AllGather(s, x)
	case "reducescatter":
		return g.ReduceScatter(s, x, collectives.Sum)
	case "broadcast":
		return g.Broadcast(s, x, 0)
	case "alltoall", "alltoallv", "gather", "scatter", "reduce", "sendrecv_batch":
		return o.startExchange(i)
	case "sendrecv":
		r, n := g.Rank(), g.Size()
		next, prev := (r+1)%n, (r+n-1)%n
		if r%2 == 0 {
			if err := g.Send(s, x, next); err != nil {
				return nil, err
			}
			return g.Recv(s, []int{o.count}, o.dt, prev)
		}
		y, err := g.Recv(s, []int{o.count}, o.dt, prev)
		if err == nil {
			err = g.Send(s, x, next)
		}
		return y, err
	}
	return nil, fmt.Errorf("unknown op %q", o.op)
}

// wait waits for every output and, where a rank's part has none (the
// sends of sendrecv and sendrecv_batch, a rooted op's other ranks), for
// the group to say it is done.
func (o *opRun) wait(ctx context.Context, outs []*array.Array) error {
	for _, y := range outs {
		if y != nil {
			if err := y.Wait(ctx); err != nil {
				return err
			}
		}
	}
	if o.op == "sendrecv" || o.op == "sendrecv_batch" || o.op == "gather" || o.op == "reduce" {
		for _, g := range o.w.groups {
			if err := g.Wait(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// free frees outputs that are not the next op's inputs.
func (o *opRun) free(outs []*array.Array) {
	if !o.inplace {
		freeAll(outs)
	}
}

// batch runs iters ops back to back, at most window in flight. The warm-up
// runs this way too, so that the buffers the timed batch keeps in flight
// (staging, outputs) exist before the clock starts.
func (o *opRun) batch(ctx context.Context, iters int) error {
	var inflight [][]*array.Array
	for range iters {
		if len(inflight) == window {
			if err := o.wait(ctx, inflight[0]); err != nil {
				return err
			}
			o.free(inflight[0])
			inflight = inflight[1:]
		}
		outs, err := o.once()
		if err != nil {
			return err
		}
		inflight = append(inflight, outs)
	}
	for _, outs := range inflight {
		if err := o.wait(ctx, outs); err != nil {
			return err
		}
		o.free(outs)
	}
	return nil
}

// check counts each held rank's wrong elements (rank r's input is all r%3,
// or r+1 for the exchange ops); a missing output counts all its elements
// wrong, an output where none is due one.
func (o *opRun) check(ctx context.Context, outs []*array.Array) ([]int64, error) {
	n := o.w.size
	sum := 0.0
	for r := range n {
		sum += float64(r % 3)
	}
	wrong := make([]int64, len(outs))
	for i, y := range outs {
		r := o.w.groups[i].Rank()
		if due := exchangeOutputs(o.op, n) == n || r == benchRoot; (y != nil) != due {
			if due {
				wrong[i] = int64(o.count * n)
			} else {
				wrong[i] = 1
			}
			continue
		} else if y == nil {
			continue
		}
		vals, err := array.ToFloat64(ctx, y)
		if err != nil {
			return nil, err
		}
		for j, v := range vals {
			var want float64
			switch o.op {
			case "alltoall", "alltoallv", "gather", "scatter", "reduce", "sendrecv_batch":
				want = o.exchangeWant(r, j)
			case "allreduce", "allreduce_inplace", "reducescatter":
				want = sum
			case "allgather":
				want = float64((j / o.count) % 3)
			case "broadcast":
				want = 0
			case "sendrecv":
				want = float64((r + n - 1) % n % 3)
			}
			if v != want {
				wrong[i]++
			}
		}
	}
	return wrong, nil
}

func freeAll(outs []*array.Array) {
	for _, o := range outs {
		if o != nil {
			_ = o.Free()
		}
	}
}

// busFactor is nccl-tests' bus bandwidth factor.
func busFactor(op string, n int) float64 {
	switch op {
	case "allreduce", "allreduce_inplace":
		return 2 * float64(n-1) / float64(n)
	case "allgather", "reducescatter", "alltoall", "alltoallv", "gather", "scatter":
		return float64(n-1) / float64(n)
	}
	return 1
}

// latency is the 1-element float32 all-reduce, end to end through the
// fence and both streams, on w's held ranks: p50 and p90 over 2000 ops
// (after 200 unmeasured), each started on every held rank and waited for
// before the next.
func latency(w *world) ([2]time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	xs := make([]*array.Array, len(w.groups))
	defer freeAll(xs)
	for i := range w.groups {
		var err error
		if xs[i], err = array.Full(w.s[i], []int{1}, gpu.Float32, 1); err != nil {
			return [2]time.Duration{}, err
		}
		if err := xs[i].Wait(ctx); err != nil {
			return [2]time.Duration{}, err
		}
	}
	if err := w.barrier(ctx); err != nil {
		return [2]time.Duration{}, err
	}
	var lat []time.Duration
	ys := make([]*array.Array, len(w.groups))
	for k := range 2200 {
		t0 := time.Now()
		for i, g := range w.groups {
			var err error
			if ys[i], err = g.AllReduce(w.s[i], xs[i], collectives.Sum); err != nil {
				return [2]time.Duration{}, fmt.Errorf("latency: %w", err)
			}
		}
		for _, y := range ys {
			if err := y.Wait(ctx); err != nil {
				return [2]time.Duration{}, fmt.Errorf("latency: %w", err)
			}
		}
		if k >= 200 {
			lat = append(lat, time.Since(t0))
		}
		freeAll(ys)
	}
	slices.Sort(lat)
	return [2]time.Duration{lat[len(lat)/2], lat[len(lat)*9/10]}, nil
}
