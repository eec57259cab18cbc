package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
)

// benchOps are the ops the sweep knows, in its default order.
var benchOps = []string{"allreduce", "allreduce_inplace", "allgather", "reducescatter", "broadcast", "sendrecv",
	"alltoall", "alltoallv", "gather", "scatter", "reduce", "sendrecv_batch"}

// benchFlags are the sweep's settings; every rank of a launch gets the
// same (args).
type benchFlags struct {
	Backend string        `help:"GPU backend: auto, sim, cuda, metal." default:"auto"`
	DType   string        `name:"dtype" help:"Element type." default:"float32"`
	Ops     string        `help:"Comma-separated ops: allreduce, allreduce_inplace, allgather, reducescatter, broadcast, sendrecv (a ring: each rank sends to the next and receives from the one before), alltoall, alltoallv (an uneven split with a zero count per rank), gather, scatter, reduce (root 0), sendrecv_batch (the ring as one Batch of a send and a receive)." default:"allreduce,allreduce_inplace,allgather,reducescatter,broadcast,sendrecv,alltoall,alltoallv,gather,scatter,reduce,sendrecv_batch"`
	MinSize sizeFlag      `help:"Smallest size per rank." default:"4KiB"`
	MaxSize sizeFlag      `help:"Largest size per rank (0: 64 MiB, less for in-process ranks where their buffers would take more than about 1 GiB: 16 MiB for 4)." default:"0"`
	Factor  int           `help:"Size step factor." default:"4"`
	Sizes   string        `help:"Comma-separated sizes per rank (e.g. 4KiB,16MiB), measured instead of the min-size..max-size sweep."`
	Iters   int           `help:"Timed iterations per size (0: by size, as in the peers' method)." default:"0"`
	Timeout time.Duration `help:"Deadline of each collective." default:"60s"`
	Profile string        `name:"cpuprofile" help:"Write a CPU profile (go tool pprof) of the sweep to this file; a rank that is a process writes FILE.rankN." placeholder:"FILE"`

	capped bool // resolveMaxSize stopped the sweep short of 64 MiB for memory
}

// args is f as flags of `demo node bench`.
func (f *benchFlags) args() []string {
	return []string{"--backend=" + f.Backend, "--dtype=" + f.DType, "--ops=" + f.Ops,
		"--min-size=" + strconv.FormatUint(uint64(f.MinSize), 10), "--max-size=" + strconv.FormatUint(uint64(f.MaxSize), 10),
		"--factor=" + strconv.Itoa(f.Factor), "--sizes=" + f.Sizes, "--iters=" + strconv.Itoa(f.Iters), "--timeout=" + f.Timeout.String(), "--cpuprofile=" + f.Profile}
}

// sizes are the sizes per rank to measure, in bytes: --sizes, or the sweep
// from --min-size to --max-size.
func (f *benchFlags) sizes() ([]int, error) {
	if strings.TrimSpace(f.Sizes) == "" {
		var out []int
		for size := int(f.MinSize); size <= int(f.MaxSize) && size > 0; size *= f.Factor { // MaxSize <= 1 TiB: no overflow
			out = append(out, size)
		}
		return out, nil
	}
	var out []int
	for _, s := range strings.Split(f.Sizes, ",") {
		var v sizeFlag
		if err := v.UnmarshalText([]byte(s)); err != nil {
			return nil, err
		}
		if v < 1 || v > 1<<40 {
			return nil, fmt.Errorf("bad size %d", v)
		}
		out = append(out, int(v))
	}
	return out, nil
}

// largest is the largest size measured, for the memcpy and staging lines.
func (f *benchFlags) largest() int {
	sizes, _ := f.sizes()
	return slices.Max(append(sizes, 1))
}

// check validates the flags and returns the dtype and the ops.
func (f *benchFlags) check() (gpu.DType, []string, error) {
	dt, err := gpu.ParseDType(f.DType)
	if err != nil {
		return dt, nil, err
	}
	if f.Factor < 2 || f.MinSize < 1 || f.MaxSize < f.MinSize || f.MaxSize > 1<<40 {
		return dt, nil, fmt.Errorf("bad sweep: min %d max %d factor %d", f.MinSize, f.MaxSize, f.Factor)
	}
	if _, err := f.sizes(); err != nil {
		return dt, nil, err
	}
	var ops []string
	for _, op := range strings.Split(f.Ops, ",") {
		op = strings.TrimSpace(op)
		if !slices.Contains(benchOps, op) {
			return dt, nil, fmt.Errorf("unknown op %q (have %s)", op, strings.Join(benchOps, ", "))
		}
		ops = append(ops, op)
	}
	return dt, ops, nil
}

// benchCmd sweeps every collective over sizes, nccl-tests style, over
// ranks that are processes (demo launch -n ranks bench) or, with --inproc,
// in-process ranks.
type benchCmd struct {
	Ranks  int  `short:"n" help:"Ranks: processes of one rank each, or in-process ranks with --inproc (-np is the same)." default:"4"`
	Inproc bool `help:"Hold every rank in this process (collectives.Local) instead of launching processes."`
	benchFlags
	pathFlags
	obsFlags
}

// pathFlags choose the data path; a launched rank's group reads it from
// collectives.DataPathEnv.
type pathFlags struct {
	Datapath string `help:"The data path: auto (device-resident for payloads of 4 MiB or more when the ranks share one GPU, else staged), staged (the host path), device (kernels read the peers' device buffers: all-reduce, all-gather, reduce-scatter, broadcast; across processes through CUDA IPC) or nccl (launched ranks, one GPU each: NCCL moves the bytes)." enum:"auto,staged,device,nccl" default:"auto"`
}

// setEnv passes a data path other than auto to the groups joined from
// here, and to the ranks launched from here, in collectives.DataPathEnv.
func (f pathFlags) setEnv() error {
	if f.Datapath == "auto" || f.Datapath == "" {
		return nil
	}
	if err := os.Setenv(collectives.DataPathEnv, f.Datapath); err != nil {
		return fmt.Errorf("datapath: %w", err)
	}
	return nil
}

// Run launches the ranks, or runs them here with --inproc.
func (c *benchCmd) Run(g *globals) error {
	c.resolveMaxSize(c.Inproc, c.Ranks)
	if _, _, err := c.check(); err != nil {
		return err
	}
	c.limitHeap()
	if !c.Inproc {
		if err := c.pathFlags.setEnv(); err != nil {
			return err
		}
		return launchNodes(g, c.Ranks, append([]string{"bench"}, c.args()...), launchSpec{obs: c.obsFlags})
	}
	path := collectives.DataPathAuto
	switch c.Datapath {
	case "nccl":
		return fmt.Errorf("--datapath nccl needs launched ranks, one GPU each (NCCL refuses two ranks on one GPU): drop --inproc")
	case "device":
		path = collectives.DataPathDevice
	case "staged":
		path = collectives.DataPathStaged
	}
	w, err := newObservedWorld(g.log, c.Backend, c.Ranks, c.Timeout, c.obsFlags, collectives.WithDataPath(path))
	if err != nil {
		return err
	}
	defer w.close()
	w.path = path
	// The latency line's two ranks: a world of their own, after the sweep.
	pair := func() (*world, func(), error) {
		pw, err := newLocalWorld(g.log, c.Backend, 2, c.Timeout, collectives.WithDataPath(path))
		if err != nil {
			return nil, nil, err
		}
		return pw, pw.close, nil
	}
	return c.sweep(w, pair)
}

// sweep runs the ops over the sizes on w's held ranks, then the latency
// line on the ranks pair gives (nil on ranks other than 0 and 1). The lead
// prints one table with a row per op and size (its own timings, every
// rank's wrong elements), the memcpy reference (measured by the lead
// alone), the staging floor (every rank at once) and the latency line.
func (f *benchFlags) sweep(w *world, pair func() (*world, func(), error)) error {
	dt, ops, err := f.check()
	if err != nil {
		return err
	}
	if f.Profile != "" {
		stop, err := startProfile(f.Profile, w)
		if err != nil {
			return err
		}
		defer stop()
	}
	out := io.Discard
	if w.lead() {
		out = os.Stdout
		fmt.Printf("choreo bench: %s, %s\n", w.describe(), dt)
		fmt.Printf("data path: %s\n", w.pathLine())
		if f.capped {
			f.noteCapped(out, w.size)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout+time.Minute)
	defer cancel()
	var memcpy memcpyResult
	if w.lead() {
		memcpy = measureMemcpy(f.largest())
	}
	if err := w.barrier(ctx); err != nil {
		return err
	}
	floor, staged, err := measureStaging(w.dev, len(w.groups), w.size, f.largest())
	if err != nil {
		return err
	}
	tab := newBenchTable(out, ops, f.largest(), dt.String())
	tab.header()
	largest, err := f.rows(tab, w, ops, dt)
	if err != nil {
		return err
	}
	ar64 := max(largest.busbw["allreduce"], largest.busbw["allreduce_inplace"])
	fmt.Fprintf(out, "memcpy (1 core), %d B: %.1f us, %.3f GB/s\n", f.largest(), us(memcpy.t), memcpy.gbps)
	if staged {
		fmt.Fprintf(out, "staging floor (D2H+H2D, %d ranks at once), %d B: %.1f us, busbw %.3f GB/s\n", w.size, f.largest(), us(floor.t), floor.busbw)
	}
	if w.path == collectives.DataPathDevice && w.lead() {
		c, err := measureDeviceCopy(w.dev, f.largest())
		if err != nil {
			return err
		}
		n := float64(w.size)
		fmt.Fprintf(out, "device copy C (read+written, %s), %d B: %.1f GB/s; all-reduce floor (n-1)/n^2 C: %.1f GB/s\n", clockOf(w.dev), f.largest(), c/1e9, c*(n-1)/(n*n)/1e9)
		fused, ok, err := measureFusedFloor(w.dev, w.size, f.largest())
		if err != nil {
			return err
		}
		if ok {
			fmt.Fprintf(out, "fused all-reduce floor (one kernel over %d buffers, in place, %s), %d B: busbw %.1f GB/s\n", w.size, clockOf(w.dev), f.largest(), fused/1e9)
			for _, op := range []string{"allreduce", "allreduce_inplace"} {
				if bw := largest.busbw[op]; bw > 0 && largest.size == 64<<20 {
					fmt.Fprintf(out, "%s 64 MiB busbw / fused floor: %.0f%%\n", op, 100*bw/(fused/1e9))
				}
			}
		}
		floorLines(out, ops, largest, w.size, c)
	}
	if slices.ContainsFunc(ops, exchangeOp) {
		fmt.Fprintln(out, unevenNote(w.size))
	}
	if line := largest.allocLine(ops); line != "" {
		fmt.Fprintln(out, line)
	}
	if ar64 > 0 && largest.size == 64<<20 {
		fmt.Fprintf(out, "allreduce 64 MiB busbw / memcpy: %.0f%%\n", 100*ar64/memcpy.gbps)
		if staged {
			fmt.Fprintf(out, "allreduce 64 MiB busbw / staging floor: %.0f%%\n", 100*ar64/floor.busbw)
		}
	}
	return f.latencyLine(out, w, pair)
}

// rows measures every op at every size and prints each row as soon as it
// is measured; it returns each op's result at the largest size.
func (f *benchFlags) rows(tab *benchTable, w *world, ops []string, dt gpu.DType) (largest largestRows, err error) {
	sizes, err := f.sizes()
	if err != nil {
		return largest, err
	}
	largest = largestRows{busbw: map[string]float64{}, allocs: map[string]float64{}}
	for _, op := range ops {
		if (op == "sendrecv" || op == "sendrecv_batch") && w.size < 2 {
			continue // no ring of one rank
		}
		for _, size := range sizes {
			count := size / dt.Size()
			if op == "alltoall" {
				count -= count % w.size // equal blocks
			}
			if count < 1 {
				continue
			}
			r, err := f.measure(w, op, dt, count)
			if err != nil {
				return largest, fmt.Errorf("%s %d bytes: %w", op, size, err)
			}
			redop := "-"
			switch op {
			case "allreduce", "allreduce_inplace", "reducescatter", "reduce":
				redop = "sum"
			case "alltoallv":
				redop = unevenLabel
			}
			tab.row(op, count*dt.Size(), count, dt.String(), redop, r)
			if size == slices.Max(sizes) {
				largest.size = size
				largest.busbw[op] = r.busbw
				if r.allocs >= 0 {
					largest.allocs[op] = r.allocs
				}
			}
		}
	}
	return largest, nil
}

// largestRows is each op's bus bandwidth and driver allocations per call
// (where the device counts them) at the sweep's largest size.
type largestRows struct {
	size   int
	busbw  map[string]float64
	allocs map[string]float64
}

// allocLine says how many driver allocations each op made per call after
// its warm-up, at the largest size ("" where the device does not count).
func (l largestRows) allocLine(ops []string) string {
	var parts []string
	for _, op := range ops {
		if a, ok := l.allocs[op]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f", op, a))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("driver allocations per call after warm-up, %d B (this process): %s", l.size, strings.Join(parts, ", "))
}

// latencyLine measures the 2-rank, 1-element all-reduce on pair's world
// and has the lead print it; every rank waits for it at a barrier.
func (f *benchFlags) latencyLine(out io.Writer, w *world, pair func() (*world, func(), error)) error {
	if w.size < 2 && w.joined {
		return nil // no pair among the processes
	}
	pw, closePair, err := pair()
	if err != nil {
		return err
	}
	var lat [2]time.Duration
	if pw != nil {
		lat, err = latency(pw)
		closePair()
		if err != nil {
			return err
		}
	}
	how := ""
	if w.joined {
		how = " (processes)"
	}
	fmt.Fprintf(out, "2 ranks%s, 1-element float32 all-reduce, end to end: p50 %.1f us, p90 %.1f us\n",
		how, us(lat[0]), us(lat[1]))
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout+time.Minute)
	defer cancel()
	return w.barrier(ctx)
}

// iterations follows the peers' method (../shared/reference/peers.md):
// warm-up and timed counts by size.
func iterations(bytes int) (warm, timed int) {
	switch {
	case bytes <= 4<<10:
		return 50, 1000
	case bytes <= 64<<10:
		return 20, 500
	case bytes <= 1<<20:
		return 10, 100
	case bytes <= 16<<20:
		return 3, 20
	}
	return 2, 10
}

// startProfile starts a CPU profile into path (path.rankN for a joined
// rank) and returns what stops it and closes the file.
func startProfile(path string, w *world) (func(), error) {
	if w.joined {
		path = fmt.Sprintf("%s.rank%d", path, w.groups[0].Rank())
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// memcpyResult is the single-core copy() reference measured in this run.
type memcpyResult struct {
	t    time.Duration
	gbps float64
}

func measureMemcpy(size int) memcpyResult {
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault the pages in
	best := time.Duration(1<<63 - 1)
	for range 5 {
		t0 := time.Now()
		copy(dst, src)
		best = min(best, time.Since(t0))
	}
	return memcpyResult{t: best, gbps: float64(size) / best.Seconds() / 1e9}
}
