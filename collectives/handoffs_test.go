package collectives_test

import (
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/trace"
)

// TestHandoffBudget: a 4 KiB all-reduce of 2 in-process ranks on the sim,
// input ready, crosses at most 2 goroutine hand-offs per rank on its
// critical path (the caller to the comm stream, the comm stream back to
// the caller), as the trace counts them: the comm task that raises the
// fence's CPU word completes the GPU stream's wait itself, and the GPU
// stream's wait is suspended on the word at launch instead of held by the
// queue's worker. A count, not a time: it holds on a busy machine too.
// The first call is a warm-up, not counted: the inputs' fills ran on the
// queues' workers, which may still be finishing their completions when
// it starts.
func TestHandoffBudget(t *testing.T) {
	if testenv.Backend() != "sim" {
		t.Skipf("the budget is the sim's with host-visible memory; backend %s", testenv.Backend())
	}
	const n, calls, budget = 2, 20, 2
	tr := trace.New()
	w := newWorld(t, n, collectives.WithTracer(tr))
	ctx := testenv.Ctx(t, 60*time.Second)
	xs := make([]*array.Array, n)
	for r := range n {
		x, err := array.Full(w.s[r], []int{1024}, gpu.Float32, float64(r+1))
		if err != nil {
			t.Fatal(err)
		}
		if err := x.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		xs[r] = x
	}
	var keep []*array.Array // outputs collected meanwhile would queue their frees on the streams
	for range calls + 1 {
		var ys []*array.Array
		for r := range n {
			y, err := w.groups[r].AllReduce(w.s[r], xs[r], collectives.Sum)
			if err != nil {
				t.Fatal(err)
			}
			ys = append(ys, y)
		}
		keep = append(keep, ys...)
		for _, y := range ys {
			vals, err := array.ToSlice[float32](ctx, y)
			if err != nil {
				t.Fatal(err)
			}
			if vals[0] != 3 || vals[1023] != 3 {
				t.Fatalf("all-reduce = %v .. %v, want 3", vals[0], vals[1023])
			}
		}
	}
	for r := range n {
		if err := w.groups[r].Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The last end of a call records its count, possibly just after the
	// output was seen: wait (bounded) until every call's count is there.
	deadline := time.Now().Add(10 * time.Second)
	for r := range n {
		for {
			hops := handoffCounts(tr.Rank(r).Events())
			if len(hops) == calls+1 {
				t.Logf("rank %d: hand-offs by call %v", r, hops)
				for seq, k := range hops {
					if seq > 1 && k > budget {
						t.Errorf("rank %d call %d: %d hand-offs on the critical path, budget %d", r, seq, k, budget)
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rank %d: %d hand-off counts on the trace, want %d", r, len(hops), calls+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// handoffCounts is the "hand-offs" instants of a rank's trace by call.
func handoffCounts(evs []trace.Event) map[uint64]int {
	hops := map[uint64]int{}
	for _, e := range evs {
		if e.Name == "hand-offs" {
			hops[e.Seq] = e.Count
		}
	}
	return hops
}
