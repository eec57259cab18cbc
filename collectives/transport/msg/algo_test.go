package msg_test

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
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	_ "github.com/choreo-gpu/choreo/collectives/transport/shm" // registers its carrier
	_ "github.com/choreo-gpu/choreo/collectives/transport/tcp" // registers its carrier
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
	"github.com/choreo-gpu/choreo/gpu"
)

// algoEnv is what a carrier's rows set in the environment before its
// groups connect: shm's ring of four small slots, so that a large
// message goes through it many times over.
var algoEnv = map[string]map[string]string{
	"shm": {"CHOREO_SHM_SLOT_SIZE": "64K", "CHOREO_SHM_SLOTS": "4"},
}

// The collective algorithms run over every registered carrier (pipes,
// TCP, shared memory), one msg.Endpoint per rank: an all-reduce of small
// (recursive doubling, eager, TrySend) and large (ring, rendezvous, many
// frames or slots) payloads is exact, and ranks that disagree on the
// shape all fail with ErrShapeMismatch within the deadline.
func TestAlgorithms(t *testing.T) {
	transporttest.RegisterPipeCarrier()
	for _, name := range msg.Names() {
		t.Run(name, func(t *testing.T) {
			for k, v := range algoEnv[name] {
				t.Setenv(k, v)
			}
			ts := carrierMake(name)(t, 4)
			defer func() {
				for _, tr := range ts {
					_ = tr.Close()
				}
			}()
			allReduceExact(t, ts)
			shapeMismatch(t, ts)
		})
	}
}

// allReduceExact sums vectors of a few lengths over ts and checks every
// element of every rank's result.
func allReduceExact(t *testing.T, ts []transport.Transport) {
	n := len(ts)
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
}

// shapeMismatch runs an all-reduce in which rank 2 has one element more:
// every rank fails with ErrShapeMismatch.
func shapeMismatch(t *testing.T, ts []transport.Transport) {
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

// onRanks runs f on every rank at once and returns their errors.
func onRanks(ts []transport.Transport, f func(ctx context.Context, r int) error) []error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for r := range ts {
		wg.Go(func() { errs[r] = f(ctx, r) })
	}
	wg.Wait()
	return errs
}

// floats is vs in little-endian bytes.
func floats(vs []float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}
