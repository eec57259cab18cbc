package collectives_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

func TestAllGatherReduceScatterBroadcast(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		w := newWorld(t, n)
		for _, dt := range gpu.DTypes {
			for _, count := range []int{1, 7, 1024} {
				t.Run(fmt.Sprintf("n%d/%s/%d", n, dt, count), func(t *testing.T) {
					ins := make([][]float64, n)
					gathered, scattered, bcast := make([]*array.Array, n), make([]*array.Array, n), make([]*array.Array, n)
					root := count % n
					for r := range n {
						ins[r] = rounded(dt, input(dt, r, count))
						x := fromFloat64(t, w.s[r], dt, ins[r])
						g := w.groups[r]
						var err error
						if gathered[r], err = g.AllGather(w.s[r], x); err != nil {
							t.Fatal(err)
						}
						if scattered[r], err = g.ReduceScatter(w.s[r], x, collectives.Max); err != nil {
							t.Fatal(err)
						}
						if bcast[r], err = g.Broadcast(w.s[r], x, root); err != nil {
							t.Fatal(err)
						}
					}
					all := slices.Concat(ins...)
					full := reduceRef(dt, collectives.Max, ins)
					for r := range n {
						ctx := testenv.Ctx(t, 10*time.Second)
						got, err := array.ToFloat64(ctx, gathered[r])
						if err != nil || !slices.Equal(gathered[r].Shape(), []int{n, count}) {
							t.Fatalf("allgather rank %d: shape %v: %v", r, gathered[r].Shape(), err)
						}
						if err := compare(dt, got, all); err != nil {
							t.Fatalf("allgather rank %d: %v", r, err)
						}
						lo, hi := algo.BlockRange(count, n, r)
						got, err = array.ToFloat64(ctx, scattered[r])
						if err != nil {
							t.Fatalf("reducescatter rank %d: %v", r, err)
						}
						if err := compare(dt, got, full[lo:hi]); err != nil {
							t.Fatalf("reducescatter rank %d: %v", r, err)
						}
						got, err = array.ToFloat64(ctx, bcast[r])
						if err != nil {
							t.Fatalf("broadcast rank %d: %v", r, err)
						}
						if err := compare(dt, got, ins[root]); err != nil {
							t.Fatalf("broadcast rank %d from %d: %v", r, root, err)
						}
					}
				})
			}
		}
	}
}

// TestSendRecv: round trips are exact, including 2 ranks where the left
// and right neighbour are the same peer, and a ring of sends.
func TestSendRecv(t *testing.T) {
	for _, n := range []int{2, 3} {
		w := newWorld(t, n)
		for _, dt := range gpu.DTypes {
			t.Run(fmt.Sprintf("n%d/%s", n, dt), func(t *testing.T) {
				outs := make([]*array.Array, n)
				ins := make([][]float64, n)
				for r := range n {
					ins[r] = rounded(dt, input(dt, r, 10))
					x := fromFloat64(t, w.s[r], dt, ins[r], 2, 5)
					right, left := (r+1)%n, (r+n-1)%n
					if r%2 == 0 { // even ranks send first; the streams make it safe either way
						if err := w.groups[r].Send(w.s[r], x, right); err != nil {
							t.Fatal(err)
						}
					}
					y, err := w.groups[r].Recv(w.s[r], []int{2, 5}, dt, left)
					if err != nil {
						t.Fatal(err)
					}
					if r%2 == 1 {
						if err := w.groups[r].Send(w.s[r], x, right); err != nil {
							t.Fatal(err)
						}
					}
					outs[r] = y
				}
				for r := range n {
					got, err := array.ToFloat64(testenv.Ctx(t, 10*time.Second), outs[r])
					if err != nil {
						t.Fatalf("rank %d: %v", r, err)
					}
					if !slices.Equal(got, ins[(r+n-1)%n]) {
						t.Fatalf("rank %d got %v, want %v", r, got, ins[(r+n-1)%n])
					}
				}
				for r := range n {
					if err := w.groups[r].Wait(testenv.Ctx(t, 10*time.Second)); err != nil {
						t.Fatalf("rank %d: %v", r, err)
					}
				}
			})
		}
	}
}

func TestBarrierAndSplit(t *testing.T) {
	w := newWorld(t, 4)
	errs := make(chan error, 4)
	subs := make([]*collectives.Group, 4)
	for r := range 4 {
		go func() {
			if err := w.groups[r].Barrier(testenv.Ctx(t, 10*time.Second)); err != nil {
				errs <- err
				return
			}
			sub, err := w.groups[r].Split(r%2, -r) // evens and odds, reversed
			subs[r] = sub
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	outs := make([]*array.Array, 4)
	for r := range 4 {
		if subs[r].Size() != 2 || subs[r].Rank() != 1-r/2 {
			t.Fatalf("rank %d: subgroup rank %d of %d", r, subs[r].Rank(), subs[r].Size())
		}
		x := fromFloat64(t, w.s[r], gpu.Int32, []float64{float64(r)})
		y, err := subs[r].AllGather(w.s[r], x)
		if err != nil {
			t.Fatal(err)
		}
		outs[r] = y
	}
	for r := range 4 {
		got, err := array.ToSlice[int32](testenv.Ctx(t, 10*time.Second), outs[r])
		if err != nil {
			t.Fatal(err)
		}
		parity := int32(r % 2)
		if want := []int32{parity + 2, parity}; !slices.Equal(got, want) {
			t.Fatalf("rank %d: subgroup gather %v, want %v", r, got, want)
		}
	}
}
