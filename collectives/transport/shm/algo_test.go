package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/gpu"
)

// onRanks runs f on every rank at once and returns their errors.
func onRanks(ts []*Transport, f func(ctx context.Context, r int) error) []error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for r := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(ctx, r)
		}()
	}
	wg.Wait()
	return errs
}

func floats(vs []float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// The collective algorithms run over the shm transport: an all-reduce of
// small (eager, TrySend) and large (ring, rendezvous, many slots)
// payloads is exact, and ranks that disagree on the shape all fail with
// ErrShapeMismatch.
func TestAlgoOverShm(t *testing.T) {
	const n = 4
	ts := build(t, n, func(c *Config) { c.SlotSize = 64 << 10; c.Slots = 4 })
	defer closeAll(ts)
	for i, count := range []int{7, 1024, 1 << 20} {
		ins := make([][]byte, n)
		outs := make([][]byte, n)
		for r := range n {
			vs := make([]float32, count)
			for j := range vs {
				vs[j] = float32(r*count + j%1000)
			}
			ins[r], outs[r] = floats(vs), make([]byte, 4*count)
		}
		errs := onRanks(ts, func(ctx context.Context, r int) error {
			d := algo.Desc{Group: 1, Seq: uint64(i), DType: gpu.Float32, Count: count, Op: reduce.Sum}
			return algo.AllReduce(ctx, ts[r], d, ins[r], outs[r])
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("count %d rank %d: %v", count, r, err)
			}
		}
		for j := range count {
			want := float32(0)
			for r := range n {
				want += float32(r*count + j%1000)
			}
			for r := range n {
				if got := math.Float32frombits(binary.LittleEndian.Uint32(outs[r][4*j:])); got != want {
					t.Fatalf("count %d rank %d element %d: %v, want %v", count, r, j, got, want)
				}
			}
		}
	}
	errs := onRanks(ts, func(ctx context.Context, r int) error {
		count := 64
		if r == 2 {
			count = 65
		}
		d := algo.Desc{Group: 1, Seq: 10, DType: gpu.Float32, Count: count, Op: reduce.Sum}
		return algo.AllReduce(ctx, ts[r], d, make([]byte, 4*count), make([]byte, 4*count))
	})
	for r, err := range errs {
		if !errors.Is(err, algo.ErrShapeMismatch) {
			t.Errorf("rank %d: got %v, want ErrShapeMismatch", r, err)
		}
	}
}
