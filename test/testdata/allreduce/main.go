// Command allreduce is the README's program across processes: each
// process holds one rank, joins its group from the variables its launcher
// set (cluster.FromEnv: choreorun's, torchrun's, Open MPI's or
// Slurm's), all-reduces a vector of rank+1 on its own GPU stream and
// checks every element. The integration tests launch it.
//
// For the tests: ALLREDUCE_FAIL_RANK=r makes rank r fail before it joins,
// with a long last line; ALLREDUCE_DIE_AFTER_JOIN=r makes rank r exit 1
// right after it joined, on a launch's first start only
// (CHOREO_RESTART_COUNT 0 or unset); ALLREDUCE_PID_DIR=dir has each rank
// write its pid to dir/<rank> first.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/cluster"
	"github.com/choreo-gpu/choreo/gpu"
	_ "github.com/choreo-gpu/choreo/gpu/backends" // registers cuda, metal and the sim
	"github.com/choreo-gpu/choreo/streams"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "allreduce:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg := cluster.FromEnv()
	if dir := os.Getenv("ALLREDUCE_PID_DIR"); dir != "" {
		if err := os.WriteFile(fmt.Sprintf("%s/%d", dir, cfg.Rank), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return err
		}
	}
	if os.Getenv("ALLREDUCE_FAIL_RANK") == strconv.Itoa(cfg.Rank) {
		return fmt.Errorf("failing on purpose before the join: %s", strings.Repeat("x", 400))
	}
	rt, err := actors.NewRuntime()
	if err != nil {
		return err
	}
	defer func() { _ = rt.Close() }()
	dev, err := gpu.Open("auto") // cuda or metal where the machine has one, else the sim
	if err != nil {
		return err
	}
	defer func() { _ = dev.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g, err := cluster.Join(ctx, rt, cfg) // this process's rank
	if err != nil {
		return err
	}
	defer func() { _ = g.Close() }()
	if n := os.Getenv("CHOREO_RESTART_COUNT"); os.Getenv("ALLREDUCE_DIE_AFTER_JOIN") == strconv.Itoa(cfg.Rank) && (n == "" || n == "0") {
		fmt.Fprintln(os.Stderr, "allreduce: dying on purpose after the join")
		os.Exit(1)
	}
	s, err := streams.NewGPU(rt, dev)
	if err != nil {
		return err
	}
	x, err := array.Full(s, []int{1024}, array.Float32, float64(g.Rank()+1))
	if err != nil {
		return err
	}
	y, err := g.AllReduce(s, x, collectives.Sum) // the same ops as in process
	if err != nil {
		return err
	}
	vals, err := array.ToSlice[float32](ctx, y) // the data, or the collective's error
	if err != nil {
		return err
	}
	n := g.Size()
	want := float32(n * (n + 1) / 2)
	for i, v := range vals {
		if v != want {
			return fmt.Errorf("rank %d: element %d is %v, want %v", g.Rank(), i, v, want)
		}
	}
	fmt.Println("rank", g.Rank(), "of", n, "got", vals[0], "x", len(vals), "from", cfg.Source)
	return nil
}
