package backends_test

import (
	"context"
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	_ "github.com/choreo-gpu/choreo/gpu/backends" // registers cuda, metal and the sim
	"github.com/choreo-gpu/choreo/streams"
)

// Example is the README's "Using it" program, as written there: four
// in-process ranks all-reduce a vector, each rank on its own GPU stream.
// It imports only what the README shows.
func Example() {
	rt, err := actors.NewRuntime()
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	dev, err := gpu.Open("auto") // cuda or metal where the machine has one, else the sim
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	g, err := collectives.Local(rt, 4) // one *Group per rank
	if err != nil {
		panic(err)
	}
	ys := make([]*array.Array, len(g))
	for r := range g {
		s, err := streams.NewGPU(rt, dev) // each rank needs its own GPU stream
		if err != nil {
			panic(err)
		}
		x, err := array.Full(s, []int{1024}, array.Float32, float64(r+1))
		if err != nil {
			panic(err)
		}
		if ys[r], err = g[r].AllReduce(s, x, collectives.Sum); err != nil { // returns at once
			panic(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for r, y := range ys {
		vals, err := array.ToSlice[float32](ctx, y) // the data, or the collective's error
		if err != nil {
			panic(err)
		}
		fmt.Println("rank", r, "got", vals[0], "x", len(vals))
	}
	// Output:
	// rank 0 got 10 x 1024
	// rank 1 got 10 x 1024
	// rank 2 got 10 x 1024
	// rank 3 got 10 x 1024
}
