package choreotest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/choreotest"
	"github.com/choreo-gpu/choreo/collectives"
)

// A 2-rank all-reduce on a sim whose device memory the CPU cannot see: each
// rank's GPU stream fills its input, stages it to host memory with the
// fence update in the same unit, waits for the comm task's update and
// copies the result back; the comm stream runs one task.
func ExampleWatch_allReduceKit() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rec, err := choreotest.Open("sim-staged")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rec.Close()
	rt, err := actors.NewRuntime()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()

	tr := choreotest.NewTracer()
	groups, err := collectives.Local(rt, 2, tr.Option())
	if err != nil {
		fmt.Println(err)
		return
	}
	ranks := make([]choreotest.Rank, 2)
	for r, g := range groups {
		s, q, err := rec.NewStream(rt, fmt.Sprintf("rank%d", r))
		if err != nil {
			fmt.Println(err)
			return
		}
		ranks[r] = choreotest.Rank{Number: r, Stream: s, Queue: q, Comm: g.Comm()}
	}
	w, err := choreotest.NewWatch(ctx, tr, ranks...)
	if err != nil {
		fmt.Println(err)
		return
	}
	outs := make([]*array.Array, 2)
	for r, g := range groups {
		x, err := array.Full(ranks[r].Stream, []int{4}, array.Float32, float64(r+1))
		if err == nil {
			outs[r], err = g.AllReduce(ranks[r].Stream, x, collectives.Sum)
		}
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	plans, err := w.Plans(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for r, p := range plans {
		fmt.Printf("rank %d gpu:   %v\n", r, p.GPU)
		fmt.Printf("rank %d tasks: %d\n", r, p.Tasks)
		fmt.Printf("rank %d fence: %s\n", r, p.Fence)
	}
	sum, err := array.ToSlice[float32](ctx, outs[0]) // the recorded commands really ran
	fmt.Println("sum:", sum, err)
	// Output:
	// rank 0 gpu:   [fill copy-d2h+update wait+copy-h2d]
	// rank 0 tasks: 1
	// rank 0 fence: [allreduce: gpu.update(1) gpu.wait(2) cpu.wait(1) cpu.update(2)]
	// rank 1 gpu:   [fill copy-d2h+update wait+copy-h2d]
	// rank 1 tasks: 1
	// rank 1 fence: [allreduce: gpu.update(1) gpu.wait(2) cpu.wait(1) cpu.update(2)]
	// sum: [3 3 3 3] <nil>
}
