package collectives_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	_ "github.com/choreo-gpu/choreo/gpu/sim"
	"github.com/choreo-gpu/choreo/streams"
)

// Four in-process ranks all-reduce a gradient each; every rank gets the sum.
func Example() {
	rt, err := actors.NewRuntime()
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	dev, err := gpu.Open("sim")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	groups, err := collectives.Local(rt, 4)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	sums := make([][]float32, len(groups))
	var wg sync.WaitGroup
	for r, g := range groups {
		wg.Add(1)
		go func() { // each rank on its own goroutine, as it would be in its own process
			defer wg.Done()
			s, err := streams.NewGPU(rt, dev) // each rank its own GPU stream
			if err != nil {
				panic(err)
			}
			grad, err := array.Full(s, []int{3}, array.Float32, float64(r+1))
			if err != nil {
				panic(err)
			}
			sum, err := g.AllReduce(s, grad, collectives.Sum) // returns at once
			if err != nil {
				panic(err)
			}
			if sums[r], err = array.ToSlice[float32](ctx, sum); err != nil { // waits, bounded by ctx
				panic(err)
			}
		}()
	}
	wg.Wait()
	fmt.Println(sums[0], sums[3])
	// Output: [10 10 10] [10 10 10]
}
