package collectives_test

// Fuzz targets for the values a rank takes from its user and from its
// peers through the group API: Split's (color, key), exchanged between
// the ranks and decoded on each, and Recv's shape and dtype, from which it
// allocates. Run one with:
//
//	go test -run='^$' -fuzz='^FuzzSplit$' -fuzztime=30s ./collectives

import (
	"cmp"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// FuzzSplit: with any colors and keys (all of int's range), each rank gets
// the subgroup MPI_Comm_split defines: the ranks of its color ordered by
// key, ties by rank, or none for a negative color; and the subgroups
// really communicate in that order (an all-gather of the world ranks).
func FuzzSplit(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), int64(0), int64(0), int64(0))
	f.Add(int64(0), int64(2), int64(0), int64(1), int64(0), int64(0))
	f.Add(int64(0), int64(math.MaxInt64), int64(0), int64(-1), int64(1), int64(0)) // MaxInt vs -1
	f.Add(int64(0), int64(math.MinInt64), int64(0), int64(1), int64(0), int64(0))  // MinInt vs 1
	f.Add(int64(-1), int64(0), int64(math.MinInt64), int64(0), int64(2), int64(0)) // negative colors
	f.Add(int64(1<<40), int64(-5), int64(1<<40), int64(5), int64(7), int64(0))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64), int64(0))
	const n = 3
	rt := testenv.Runtime(f)
	dev := testenv.Device(f)
	world, err := collectives.Local(rt, n, collectives.WithTimeout(10*time.Second))
	if err != nil {
		f.Fatal(err)
	}
	ss := make([]*streams.GPU, n)
	for r := range n {
		if ss[r], err = streams.NewGPU(rt, dev); err != nil {
			f.Fatal(err)
		}
	}
	f.Cleanup(func() {
		for _, g := range world {
			_ = g.Close()
		}
	})
	f.Fuzz(func(t *testing.T, c0, k0, c1, k1, c2, k2 int64) {
		colors, keys := []int{int(c0), int(c1), int(c2)}, []int{int(k0), int(k1), int(k2)}
		subs := make([]*collectives.Group, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			wg.Go(func() { subs[r], errs[r] = world[r].Split(colors[r], keys[r]) })
		}
		wg.Wait()
		defer func() {
			for _, s := range subs {
				if s != nil {
					_ = s.Close()
				}
			}
		}()
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("colors %v keys %v: rank %d: split: %v", colors, keys, r, errs[r])
			}
		}
		outs := make([]*array.Array, n)
		for r := range n {
			var members []int // the model
			for q := range n {
				if colors[q] == colors[r] {
					members = append(members, q)
				}
			}
			slices.SortStableFunc(members, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
			switch {
			case colors[r] < 0:
				if subs[r] != nil {
					t.Fatalf("colors %v keys %v: rank %d (negative color) got a group of %d", colors, keys, r, subs[r].Size())
				}
				continue
			case subs[r] == nil:
				t.Fatalf("colors %v keys %v: rank %d got no group", colors, keys, r)
			case subs[r].Size() != len(members) || subs[r].Rank() != slices.Index(members, r):
				t.Fatalf("colors %v keys %v: rank %d is rank %d of %d, want rank %d of %v (ordered by key, ties by rank)",
					colors, keys, r, subs[r].Rank(), subs[r].Size(), slices.Index(members, r), members)
			}
			x, err := array.FromSlice(ss[r], []int32{int32(r)})
			if err != nil {
				t.Fatal(err)
			}
			if outs[r], err = subs[r].AllGather(ss[r], x); err != nil {
				t.Fatal(err)
			}
		}
		for r := range n {
			if outs[r] == nil {
				continue
			}
			got, err := array.ToSlice[int32](testenv.Ctx(t, 10*time.Second), outs[r])
			if err != nil {
				t.Fatalf("colors %v keys %v: rank %d: all-gather on the subgroup: %v", colors, keys, r, err)
			}
			for i, q := range got {
				if id := subs[int(q)].Rank(); id != i {
					t.Fatalf("colors %v keys %v: rank %d: the subgroup gathered %v: position %d holds world rank %d, whose subgroup rank is %d",
						colors, keys, r, got, i, q, id)
				}
			}
		}
	})
}

// FuzzRecvShape: Recv takes any shape and dtype value; it refuses invalid
// dtypes, negative dimensions and payloads it cannot hold at once, with a
// sentinel and without allocating much, and otherwise receives exactly
// what the peer sends.
func FuzzRecvShape(f *testing.F) {
	enc := func(dims ...int) []byte {
		var b []byte
		for _, d := range dims {
			b = binary.LittleEndian.AppendUint64(b, uint64(d))
		}
		return b
	}
	f.Add(enc(2, 3), uint8(gpu.Float32))
	f.Add(enc(), uint8(gpu.Int8))               // a scalar (shape nil)
	f.Add(enc(0, 1<<62), uint8(gpu.Float64))    // no elements
	f.Add(enc(1<<62, 4), uint8(gpu.Float32))    // the count wraps to 0
	f.Add(enc(1<<62, 2, 3), uint8(gpu.Float32)) // the count wraps negative
	f.Add(enc(1<<32, 1<<32), uint8(gpu.Int8))
	f.Add(enc(math.MaxInt), uint8(gpu.Uint8))
	f.Add(enc(-1, 4), uint8(gpu.Int16))
	f.Add(enc(4, -1), uint8(gpu.Int16))
	f.Add(enc(4), uint8(0))
	f.Add(enc(4), uint8(200))
	f.Add(enc(1<<20), uint8(gpu.Float32)) // over the group's limit
	const limit = 64 << 10
	rt := testenv.Runtime(f)
	dev := testenv.Device(f)
	ss := make([]*streams.GPU, 2)
	for r := range ss {
		var err error
		if ss[r], err = streams.NewGPU(rt, dev); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte, dtRaw uint8) {
		var shape []int
		for len(raw) >= 8 && len(shape) < 5 {
			shape = append(shape, int(binary.LittleEndian.Uint64(raw)))
			raw = raw[8:]
		}
		for _, b := range raw { // the rest: small dimensions
			if len(shape) >= 5 {
				break
			}
			shape = append(shape, int(b%8))
		}
		dt := gpu.DType(dtRaw)
		gs, err := collectives.Local(rt, 2, collectives.WithTimeout(10*time.Second), collectives.WithMaxBytes(limit))
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, g := range gs {
				_ = g.Close()
			}
		}()
		negative := slices.ContainsFunc(shape, func(d int) bool { return d < 0 })
		count, over := 1, false // exact: over once the count passes the limit
		for _, d := range shape {
			if d == 0 {
				count, over = 0, false
				break
			}
			if !negative && (over || d > limit || count*d > limit) {
				over = true
				continue
			}
			count *= d
		}
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		y, err := gs[0].Recv(ss[0], shape, dt, 1)
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		switch {
		case !dt.Valid() || negative:
			if !errors.Is(err, collectives.ErrBadArgument) {
				t.Fatalf("Recv(%v, dtype %d) = %v, %v: want ErrBadArgument", shape, dtRaw, y, err)
			}
		case over || count*dt.Size() > limit:
			if err == nil {
				t.Fatalf("Recv(%v, %s) = %v: accepted a payload over the limit of %d bytes", shape, dt, y, limit)
			}
			if !errors.Is(err, collectives.ErrTooLarge) && !errors.Is(err, collectives.ErrBadArgument) && !errors.Is(err, array.ErrTooLarge) {
				t.Fatalf("Recv(%v, %s) = %v: want ErrTooLarge or ErrBadArgument", shape, dt, err)
			}
		case err != nil:
			t.Fatalf("Recv(%v, %s): %v", shape, dt, err)
		case y == nil:
			t.Fatalf("Recv(%#v, %s) returned neither an array nor an error", shape, dt)
		default:
			x, err := array.Full(ss[1], shape, dt, 3)
			if err != nil {
				t.Fatal(err)
			}
			if err := gs[1].Send(ss[1], x, 0); err != nil {
				t.Fatal(err)
			}
			got, err := array.ToFloat64(testenv.Ctx(t, 10*time.Second), y)
			if err != nil || len(got) != count || !slices.Equal(y.Shape(), shape) {
				t.Fatalf("Recv(%v, %s): %v elements of shape %v, %v; want %d", shape, dt, len(got), y.Shape(), err, count)
			}
			for i, v := range got {
				if v != 3 {
					t.Fatalf("Recv(%v, %s): element %d = %v, want 3", shape, dt, i, v)
				}
			}
		}
		if err != nil && after.TotalAlloc-before.TotalAlloc > 1<<20 {
			t.Fatalf("Recv(%v, %s) refused (%v) after allocating %d bytes", shape, dt, err, after.TotalAlloc-before.TotalAlloc)
		}
	})
}
