package main

import (
	"fmt"
	"slices"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
	"github.com/choreo-gpu/choreo/streams"
)

// The matrix's exchange steps (the correctness matrix across processes for
// the ops that move blocks between ranks): all-to-all, even and uneven
// (zero counts included), gather and scatter from the first and the last
// rank, reduce to a root and the ring as one Batch, for every dtype at 0,
// 1, 7 and 1024 elements per block and float32 at 1024x1024. Whatever only
// moves data is checked exactly; a reduction against its float64 reference
// (integers exact, floats within tolerance's relative error bounds).

// exchangeCounts are the elements per block of the exchange steps.
func exchangeCounts(dt gpu.DType) []int {
	if dt == gpu.Float32 {
		return []int{0, 1, 7, 1024, 1024 * 1024}
	}
	return []int{0, 1, 7, 1024}
}

// exchange runs the exchange steps; every rank runs the same steps in the
// same order.
func (k *checker) exchange() {
	last := k.g.Size() - 1
	var steps []func()
	for _, dt := range gpu.DTypes {
		for _, count := range exchangeCounts(dt) {
			steps = append(steps,
				func() { k.allToAll(dt, count) },
				func() { k.allToAllV(dt, count) },
				func() { k.gather(dt, count, 0) },
				func() { k.gather(dt, count, last) },
				func() { k.scatter(dt, count, 0) },
				func() { k.scatter(dt, count, last) },
				func() { k.reduceRoot(dt, collectives.Sum, count, last) },
				func() { k.batchRing(dt, count) })
		}
	}
	for _, dt := range []gpu.DType{gpu.Float32, gpu.Int8, gpu.BFloat16, gpu.Float16} {
		for _, op := range []collectives.Op{collectives.Min, collectives.Max, collectives.Prod} {
			steps = append(steps,
				func() { k.reduceRoot(dt, op, 7, 0) },
				func() { k.reduceRoot(dt, op, 1024, last) })
		}
	}
	for _, step := range steps { // a failure that breaks the group ends them
		if k.broken {
			return
		}
		step()
	}
}

// exchangeValue is element i of rank r's data in the exchange steps: a
// small integer, exact in every dtype, that differs between neighbouring
// elements and ranks.
func exchangeValue(r, i int) float64 { return float64((r*37 + i*11) % 97) }

// exchangeValues is rank r's elements [from, from+n).
func exchangeValues(r, from, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = exchangeValue(r, from+i)
	}
	return out
}

// fromFloat64 makes an array of dt and shape on s from vals (each exact in
// dt).
func fromFloat64(s *streams.GPU, dt gpu.DType, vals []float64, shape ...int) (*array.Array, error) {
	switch dt {
	case gpu.Float32:
		return array.FromSlice(s, conv(vals, func(f float64) float32 { return float32(f) }), shape...)
	case gpu.Float64:
		return array.FromSlice(s, vals, shape...)
	case gpu.Float16:
		return array.FromSlice(s, conv(vals, func(f float64) half.Float16 { return half.F16(float32(f)) }), shape...)
	case gpu.BFloat16:
		return array.FromSlice(s, conv(vals, func(f float64) half.BFloat16 { return half.BF16(float32(f)) }), shape...)
	case gpu.Int8:
		return array.FromSlice(s, conv(vals, func(f float64) int8 { return int8(f) }), shape...)
	case gpu.Int16:
		return array.FromSlice(s, conv(vals, func(f float64) int16 { return int16(f) }), shape...)
	case gpu.Int32:
		return array.FromSlice(s, conv(vals, func(f float64) int32 { return int32(f) }), shape...)
	case gpu.Int64:
		return array.FromSlice(s, conv(vals, func(f float64) int64 { return int64(f) }), shape...)
	case gpu.Uint8:
		return array.FromSlice(s, conv(vals, func(f float64) uint8 { return uint8(f) }), shape...)
	}
	return nil, fmt.Errorf("dtype %v: %w", dt, collectives.ErrBadArgument)
}

func conv[T any](vals []float64, f func(float64) T) []T {
	out := make([]T, len(vals))
	for i, v := range vals {
		out[i] = f(v)
	}
	return out
}

// moved runs one exchange step on this rank's input (vals, of shape) and
// checks its output: exactly want, of shape wantShape; a nil wantShape
// means the rank gets no output and its part must end well (Wait).
func (k *checker) moved(step string, dt gpu.DType, vals []float64, shape []int,
	run func(x *array.Array) (*array.Array, error), want []float64, wantShape []int) {
	x, err := fromFloat64(k.s, dt, vals, shape...)
	var y *array.Array
	if err == nil {
		y, err = run(x)
		_ = x.Free() // the collective holds its own share while it reads
	}
	k.outcome(step, dt, y, err, want, wantShape, true)
}

// outcome checks a step's output y (or, with a nil wantShape, its absence
// and the rank's part through Wait): exactly want, or within dt's
// tolerance unless exact.
func (k *checker) outcome(step string, dt gpu.DType, y *array.Array, err error, want []float64, wantShape []int, exact bool) {
	if err == nil && wantShape == nil {
		if y != nil {
			_ = y.Free()
			err = fmt.Errorf("an output of shape %v on a rank that gets none", y.Shape())
		} else {
			ctx, cancel := k.ctx()
			err = k.g.Wait(ctx)
			cancel()
		}
		k.verdict(step, err)
		return
	}
	if err == nil && y == nil {
		err = fmt.Errorf("no output, want shape %v", wantShape)
	}
	if err == nil && !slices.Equal(y.Shape(), wantShape) {
		err = fmt.Errorf("shape %v, want %v", y.Shape(), wantShape)
	}
	var got []float64
	if err == nil {
		got, err = k.values(y)
	} else if y != nil {
		_ = y.Free()
	}
	if err == nil {
		if exact {
			err = same(got, want)
		} else {
			err = compare(dt, got, want)
		}
	}
	k.verdict(step, err)
}

func (k *checker) verdict(step string, err error) {
	if err != nil {
		k.fail(step, err)
		return
	}
	k.pass(step)
}

// same checks that got is want, element for element.
func same(got, want []float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d elements, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("element %d: %v, want %v", i, got[i], want[i])
		}
	}
	return nil
}

// allToAll checks an even all-to-all of count elements per block: rank r
// gets block r of every rank's input, in rank order.
func (k *checker) allToAll(dt gpu.DType, count int) {
	n, r := k.g.Size(), k.g.Rank()
	var want []float64
	for q := range n {
		want = append(want, exchangeValues(q, r*count, count)...)
	}
	k.moved(fmt.Sprintf("alltoall/%s/%d", dt, count), dt, exchangeValues(r, 0, n*count), []int{n * count},
		func(x *array.Array) (*array.Array, error) { return k.g.AllToAll(k.s, x) }, want, []int{n * count})
}

// unevenRows is what rank i sends rank j in the uneven all-to-all of
// about count rows: nothing for a third of the pairs (some ranks to
// themselves), the others count plus 0-2 rows.
func unevenRows(i, j, count int) int {
	if (i+2*j)%3 == 0 {
		return 0
	}
	return count + (i+j)%3
}

// allToAllV checks an uneven all-to-all of rows of 2 elements (count/2
// rows per pair or so, some pairs none): rank r gets each rank's rows for
// it, in rank order.
func (k *checker) allToAllV(dt gpu.DType, count int) {
	n, r := k.g.Size(), k.g.Rank()
	rows := count / 2
	// from(q, j) is where rank q's rows for j start in its input, in rows.
	from := func(q, j int) int {
		off := 0
		for p := range j {
			off += unevenRows(q, p, rows)
		}
		return off
	}
	send, recv := make([]int, n), make([]int, n)
	var want []float64
	for j := range n {
		send[j], recv[j] = unevenRows(r, j, rows), unevenRows(j, r, rows)
		want = append(want, exchangeValues(j, 2*from(j, r), 2*recv[j])...)
	}
	total := from(r, n)
	k.moved(fmt.Sprintf("alltoallv/%s/%d", dt, count), dt, exchangeValues(r, 0, 2*total), []int{total, 2},
		func(x *array.Array) (*array.Array, error) { return k.g.AllToAllV(k.s, x, send, recv) },
		want, []int{len(want) / 2, 2})
}

// gather checks a gather of count elements per rank to root.
func (k *checker) gather(dt gpu.DType, count, root int) {
	n, r := k.g.Size(), k.g.Rank()
	var want []float64
	var shape []int
	if r == root {
		for q := range n {
			want = append(want, exchangeValues(q, 0, count)...)
		}
		shape = []int{n, count}
	}
	k.moved(fmt.Sprintf("gather/%s/%d/root%d", dt, count, root), dt, exchangeValues(r, 0, count), []int{count},
		func(x *array.Array) (*array.Array, error) { return k.g.Gather(k.s, x, root) }, want, shape)
}

// scatter checks a scatter of root's Size() blocks of count elements.
func (k *checker) scatter(dt gpu.DType, count, root int) {
	n, r := k.g.Size(), k.g.Rank()
	k.moved(fmt.Sprintf("scatter/%s/%d/root%d", dt, count, root), dt, exchangeValues(r, 0, n*count), []int{n, count},
		func(x *array.Array) (*array.Array, error) { return k.g.Scatter(k.s, x, root) },
		exchangeValues(root, r*count, count), []int{count})
}

// reduceRoot checks a reduction by op to root, on the all-reduce steps'
// inputs (rank r's: r+1, r+2, ..., or 1+r%2 for a product).
func (k *checker) reduceRoot(dt gpu.DType, op collectives.Op, count, root int) {
	step := fmt.Sprintf("reduce/%s/%s/%d/root%d", dt, op, count, root)
	ins, err := k.inputs(count, dt, op)
	if err != nil {
		k.fail(step, err)
		return
	}
	x, err := k.input(k.g.Rank(), count, dt, op)
	var y *array.Array
	if err == nil {
		y, err = k.g.Reduce(k.s, x, op, root)
		_ = x.Free()
	}
	var shape []int
	if k.g.Rank() == root {
		shape = []int{count}
	}
	k.outcome(step, dt, y, err, reduce(dt, op, ins), shape, false)
}

// batchRing checks one Batch around the ring both ways, its receives
// listed before its sends (one op at a time, that order would wait
// forever): each rank receives its left neighbour's first array and its
// right neighbour's second.
func (k *checker) batchRing(dt gpu.DType, count int) {
	n, r := k.g.Size(), k.g.Rank()
	step := fmt.Sprintf("batch/%s/%d", dt, count)
	if n == 1 {
		return
	}
	left, right := (r+n-1)%n, (r+1)%n
	a, err := fromFloat64(k.s, dt, exchangeValues(r, 0, count), count)
	if err != nil {
		k.fail(step, err)
		return
	}
	defer func() { _ = a.Free() }()
	b, err := fromFloat64(k.s, dt, exchangeValues(r+n, 0, count), count)
	if err != nil {
		k.fail(step, err)
		return
	}
	defer func() { _ = b.Free() }()
	ys, err := k.g.Batch(k.s, collectives.RecvOp([]int{count}, dt, left), collectives.RecvOp([]int{count}, dt, right),
		collectives.SendOp(a, right), collectives.SendOp(b, left))
	if err == nil && (len(ys) != 4 || ys[0] == nil || ys[1] == nil || ys[2] != nil || ys[3] != nil) {
		err = fmt.Errorf("outputs %v: want a receive's array each and none for the sends", ys)
	}
	if err == nil {
		ctx, cancel := k.ctx()
		err = k.g.Wait(ctx)
		cancel()
	}
	var got [2][]float64
	for i := range got {
		if err == nil {
			got[i], err = k.values(ys[i])
		}
	}
	if err == nil {
		err = same(got[0], exchangeValues(left, 0, count))
	}
	if err == nil {
		err = same(got[1], exchangeValues(right+n, 0, count))
	}
	k.verdict(step, err)
}

// mismatchAllToAllV: rank n-1 expects one row fewer from rank 0 than rank
// 0 sends it; every rank must fail with ErrShapeMismatch.
func (k *checker) mismatchAllToAllV() {
	n, r := k.g.Size(), k.g.Rank()
	send, recv := make([]int, n), make([]int, n)
	for j := range n {
		send[j], recv[j] = 2, 2
	}
	if r == n-1 {
		recv[0] = 1
	}
	x, err := array.Full(k.s, []int{2 * n, 3}, gpu.Float32, float64(r))
	var y *array.Array
	if err == nil {
		y, err = k.g.AllToAllV(k.s, x, send, recv)
		_ = x.Free()
	}
	if err == nil {
		_, err = k.values(y)
	}
	k.mismatched("mismatch/alltoallv", err)
}
