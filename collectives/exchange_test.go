package collectives_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// exchangeSizes are the sizes of the exchange matrix (elements
// per block); 1024x1024 only for float32, to keep the race-enabled suite
// short (the algorithms' byte paths are the same for every dtype).
func exchangeSizes(dt gpu.DType) []int {
	if dt == gpu.Float32 {
		return []int{0, 1, 7, 1024, 1024 * 1024}
	}
	return []int{0, 1, 7, 1024}
}

// unevenRows is rank i's row count for rank j in the uneven all-to-all:
// zero for a third of the pairs.
func unevenRows(i, j, count int) int {
	if (i+2*j)%3 == 0 {
		return 0
	}
	return count + (i+j)%3
}

func values(t testing.TB, dt gpu.DType, a *array.Array) []float64 {
	t.Helper()
	got, err := array.ToFloat64(testenv.Ctx(t, 60*time.Second), a)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestExchangeMatrix: all-to-all (equal and uneven splits, zero counts
// included), gather, scatter and reduce on 2-4 in-process ranks, every
// dtype, sizes 0 to 1024x1024; results exact (reduce: within the per-dtype
// relative error bounds of tolerance) and of the documented shapes. The
// plain run takes the 1024x1024 case, most of the matrix's time under
// -race and growing with the square of the ranks (30-120 s on 4 ranks on a
// loaded 2-core machine), on 2 ranks only; CHOREO_TEST_FULL=1 on every
// rank count.
func TestExchangeMatrix(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		w := newWorld(t, n, collectives.WithTimeout(60*time.Second))
		for _, dt := range gpu.DTypes {
			for _, count := range exchangeSizes(dt) {
				t.Run(fmt.Sprintf("n%d/%s/%d", n, dt, count), func(t *testing.T) {
					testenv.Sliced(t, count < 1024*1024 || n == 2)
					exchangeCase(t, w, n, dt, count)
				})
			}
		}
	}
}

func exchangeCase(t *testing.T, w *world, n int, dt gpu.DType, count int) {
	ins := make([][]float64, n)    // rank r's all-to-all input: n blocks of count
	rows := make([][][]float64, n) // rows[i][j]: rank i's uneven rows for j (2 columns)
	a2a, a2av, gath, scat, red := make([]*array.Array, n), make([]*array.Array, n), make([]*array.Array, n), make([]*array.Array, n), make([]*array.Array, n)
	gRoot, sRoot, rRoot := count%n, (count+1)%n, (count+2)%n
	op := []collectives.Op{collectives.Sum, collectives.Prod, collectives.Min, collectives.Max}[count%4]
	for r := range n {
		g, s := w.groups[r], w.s[r]
		ins[r] = rounded(dt, input(dt, r, n*count))
		x := fromFloat64(t, s, dt, ins[r], n*count)
		var flat []float64
		send, recv := make([]int, n), make([]int, n)
		rows[r] = make([][]float64, n)
		for j := range n {
			send[j], recv[j] = unevenRows(r, j, count), unevenRows(j, r, count)
			rows[r][j] = rounded(dt, input(dt, r*n+j+1, 2*send[j]))
			flat = append(flat, rows[r][j]...)
		}
		xv := fromFloat64(t, s, dt, flat, len(flat)/2, 2)
		var err error
		if a2a[r], err = g.AllToAll(s, x); err != nil {
			t.Fatal(err)
		}
		if a2av[r], err = g.AllToAllV(s, xv, send, recv); err != nil {
			t.Fatal(err)
		}
		block := fromFloat64(t, s, dt, ins[r][:count], count)
		if gath[r], err = g.Gather(s, block, gRoot); err != nil {
			t.Fatal(err)
		}
		if scat[r], err = g.Scatter(s, fromFloat64(t, s, dt, ins[r], n, count), sRoot); err != nil {
			t.Fatal(err)
		}
		if red[r], err = g.Reduce(s, block, op, rRoot); err != nil {
			t.Fatal(err)
		}
	}
	blocks := make([][]float64, n)
	for r := range n {
		blocks[r] = ins[r][:count]
	}
	for r := range n {
		var want, wantV []float64
		for j := range n {
			want = append(want, ins[j][r*count:(r+1)*count]...)
			wantV = append(wantV, rows[j][r]...)
		}
		if err := compare(dt, values(t, dt, a2a[r]), want); err != nil || !slices.Equal(a2a[r].Shape(), []int{n * count}) {
			t.Fatalf("alltoall rank %d: shape %v: %v", r, a2a[r].Shape(), err)
		}
		if err := compare(dt, values(t, dt, a2av[r]), wantV); err != nil || !slices.Equal(a2av[r].Shape(), []int{len(wantV) / 2, 2}) {
			t.Fatalf("alltoallv rank %d: shape %v: %v", r, a2av[r].Shape(), err)
		}
		if err := compare(dt, values(t, dt, scat[r]), ins[sRoot][r*count:(r+1)*count]); err != nil || !slices.Equal(scat[r].Shape(), []int{count}) {
			t.Fatalf("scatter rank %d from %d: shape %v: %v", r, sRoot, scat[r].Shape(), err)
		}
		if (gath[r] != nil) != (r == gRoot) || (red[r] != nil) != (r == rRoot) {
			t.Fatalf("rank %d: gather output %v (root %d), reduce output %v (root %d): only the root gets one", r, gath[r] != nil, gRoot, red[r] != nil, rRoot)
		}
		if err := w.groups[r].Wait(testenv.Ctx(t, 60*time.Second)); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if err := compare(dt, values(t, dt, gath[gRoot]), slices.Concat(blocks...)); err != nil || !slices.Equal(gath[gRoot].Shape(), []int{n, count}) {
		t.Fatalf("gather at %d: shape %v: %v", gRoot, gath[gRoot].Shape(), err)
	}
	if err := compare(dt, values(t, dt, red[rRoot]), reduceRef(dt, op, blocks)); err != nil {
		t.Fatalf("reduce %s at %d: %v", op, rRoot, err)
	}
}

// TestExchangeGroupOfOne: a group of one gets its own data back.
func TestExchangeGroupOfOne(t *testing.T) {
	w := newWorld(t, 1)
	g, s := w.groups[0], w.s[0]
	vals := []float64{1, 2, 3, 4}
	x := fromFloat64(t, s, gpu.Int32, vals, 4)
	outs := map[string]func() (*array.Array, error){
		"alltoall":  func() (*array.Array, error) { return g.AllToAll(s, x) },
		"alltoallv": func() (*array.Array, error) { return g.AllToAllV(s, x, []int{4}, []int{4}) },
		"gather":    func() (*array.Array, error) { return g.Gather(s, x, 0) },
		"scatter":   func() (*array.Array, error) { return g.Scatter(s, fromFloat64(t, s, gpu.Int32, vals, 1, 4), 0) },
		"reduce":    func() (*array.Array, error) { return g.Reduce(s, x, collectives.Sum, 0) },
	}
	for name, f := range outs {
		y, err := f()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := values(t, gpu.Int32, y); !slices.Equal(got, vals) || sizeOfShape(y.Shape()) != 4 {
			t.Fatalf("%s: %v of shape %v, want %v", name, got, y.Shape(), vals)
		}
	}
}

func sizeOfShape(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// TestExchangeMismatch: counts that disagree pairwise fail every
// rank's output with ErrShapeMismatch, the ranks that get no output (a
// gather's non-roots) in Wait; bad local arguments fail at once with
// ErrBadArgument and their peers' calls fail too; the group goes on.
func TestExchangeMismatch(t *testing.T) {
	const n = 3
	w := newWorld(t, n)
	outs := make([]*array.Array, n)
	for r := range n {
		x := fromFloat64(t, w.s[r], gpu.Float32, make([]float64, 2*n), 2*n)
		send, recv := []int{2, 2, 2}, []int{2, 2, 2}
		if r == 2 {
			recv[1] = 1 // rank 1 sends it 2
		}
		var err error
		if outs[r], err = w.groups[r].AllToAllV(w.s[r], x, send, recv); err != nil {
			t.Fatal(err)
		}
	}
	for r := range n {
		if err := outs[r].Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrShapeMismatch) {
			t.Fatalf("alltoallv rank %d: %v, want ErrShapeMismatch", r, err)
		}
		w.groups[r].Wait(testenv.Ctx(t, 30*time.Second)) // clears the recorded failure
	}
	// Gather with different block sizes: the root's output and every
	// rank's Wait fail.
	var root *array.Array
	for r := range n {
		y, err := w.groups[r].Gather(w.s[r], fromFloat64(t, w.s[r], gpu.Float32, make([]float64, 1+r%2), 1+r%2), 0)
		if err != nil {
			t.Fatal(err)
		}
		if r == 0 {
			root = y
		}
	}
	if err := root.Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrShapeMismatch) {
		t.Fatalf("gather root: %v, want ErrShapeMismatch", err)
	}
	for r := range n {
		if err := w.groups[r].Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrShapeMismatch) {
			t.Fatalf("gather rank %d Wait: %v, want ErrShapeMismatch", r, err)
		}
	}
	// A shape that does not split: refused at once on that rank; its
	// peers fail rather than wait.
	ys := make([]*array.Array, n)
	for r := range n {
		rows := 2 * n
		if r == 1 {
			rows = 2*n + 1
		}
		var err error
		ys[r], err = w.groups[r].AllToAll(w.s[r], fromFloat64(t, w.s[r], gpu.Float32, make([]float64, rows), rows))
		if (r == 1) != errors.Is(err, collectives.ErrBadArgument) || r != 1 && err != nil {
			t.Fatalf("rank %d: %v; want ErrBadArgument on rank 1 only", r, err)
		}
	}
	for r := range n {
		if r == 1 {
			continue
		}
		if err := ys[r].Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrAborted) || !errors.Is(err, collectives.ErrBadArgument) {
			t.Fatalf("rank %d: %v, want the abort of rank 1's refused call, with its cause", r, err)
		}
	}
	for r := range n {
		w.groups[r].Wait(testenv.Ctx(t, 30*time.Second))
	}
	// The group goes on.
	for r := range n {
		y, err := w.groups[r].Reduce(w.s[r], fromFloat64(t, w.s[r], gpu.Int64, []float64{float64(r)}, 1), collectives.Sum, 1)
		if err != nil {
			t.Fatal(err)
		}
		ys[r] = y
	}
	if got := values(t, gpu.Int64, ys[1]); got[0] != 3 {
		t.Fatalf("reduce after the failures: %v, want 3", got)
	}
}
