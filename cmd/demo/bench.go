package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
)

// benchCmd sweeps every collective over sizes, nccl-tests style.
type benchCmd struct {
	Ranks   int           `help:"In-process ranks." default:"4"`
	Backend string        `help:"GPU backend: auto, sim, cuda, metal." default:"auto"`
	DType   string        `name:"dtype" help:"Element type." default:"float32"`
	Ops     string        `help:"Comma-separated ops: allreduce, allreduce_inplace, allgather, reducescatter, broadcast, sendrecv." default:"allreduce,allreduce_inplace,allgather,reducescatter,broadcast,sendrecv"`
	MinSize sizeFlag      `help:"Smallest size per rank." default:"4KiB"`
	MaxSize sizeFlag      `help:"Largest size per rank." default:"64MiB"`
	Factor  int           `help:"Size step factor." default:"4"`
	Iters   int           `help:"Timed iterations per size (0: by size, as in the peers' method)." default:"0"`
	Timeout time.Duration `help:"Deadline of each collective." default:"60s"`
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

// Run prints one table per op with a row per size, then the memcpy
// reference and the 2-rank 1-element latency line.
func (c *benchCmd) Run(log *zap.Logger) error {
	dt, err := gpu.ParseDType(c.DType)
	if err != nil {
		return err
	}
	if c.Factor < 2 || c.MinSize < 1 || c.MaxSize < c.MinSize || c.MaxSize > 1<<40 {
		return fmt.Errorf("bad sweep: min %d max %d factor %d", c.MinSize, c.MaxSize, c.Factor)
	}
	w, err := newWorld(log, c.Backend, c.Ranks, c.Timeout)
	if err != nil {
		return err
	}
	defer w.close()
	fmt.Printf("choreo bench: %d in-process ranks on %s, %s\n", c.Ranks, w.describe(), dt)
	memcpy := measureMemcpy(int(c.MaxSize))
	floor, staged, err := measureStaging(w.dev, c.Ranks, int(c.MaxSize))
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tsize(B)\tcount\ttype\tredop\ttime(us)\tp50(us)\talgbw GB/s\tbusbw GB/s\t#wrong\t")
	var ar64 float64
	for _, op := range strings.Split(c.Ops, ",") {
		op = strings.TrimSpace(op)
		for size := int(c.MinSize); size <= int(c.MaxSize) && size > 0; size *= c.Factor { // MaxSize <= 1 TiB: no overflow
			count := size / dt.Size()
			if count < 1 {
				continue
			}
			r, err := c.measure(w, op, dt, count)
			if err != nil {
				return fmt.Errorf("%s %d bytes: %w", op, size, err)
			}
			redop := "-"
			if op == "allreduce" || op == "allreduce_inplace" || op == "reducescatter" {
				redop = "sum"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%.1f\t%.1f\t%.3f\t%.3f\t%d\t\n", op, count*dt.Size(), count, dt, redop,
				us(r.batch), us(r.p50), r.algbw, r.busbw, r.wrong)
			if strings.HasPrefix(op, "allreduce") && size == 64<<20 {
				ar64 = max(ar64, r.busbw)
			}
		}
	}
	fmt.Fprintf(tw, "memcpy (1 core)\t%d\t\t\t\t%.1f\t\t%.3f\t\t\t\n", int(c.MaxSize), us(memcpy.t), memcpy.gbps)
	if staged {
		fmt.Fprintf(tw, "staging floor (D2H+H2D, %d ranks at once)\t%d\t\t\t\t%.1f\t\t\t%.3f\t\t\n", c.Ranks, int(c.MaxSize), us(floor.t), floor.busbw)
	}
	_ = tw.Flush()
	if ar64 > 0 {
		fmt.Printf("allreduce 64 MiB busbw / memcpy: %.0f%% (target >= 30%%)\n", 100*ar64/memcpy.gbps)
		if staged {
			fmt.Printf("allreduce 64 MiB busbw / staging floor: %.0f%%\n", 100*ar64/floor.busbw)
		}
	}
	lat, err := latency(log, c.Backend, c.Timeout)
	if err != nil {
		return err
	}
	target := "<= 10 us on sim"
	if staged {
		target = "<= 16.5 us with staging, MLX's fast fence on an M3 Max"
	}
	fmt.Printf("2 ranks, 1-element float32 all-reduce, end to end: p50 %.1f us, p90 %.1f us (target %s)\n",
		us(lat[0]), us(lat[1]), target)
	return nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// result is one row of the sweep.
type result struct {
	batch, p50   time.Duration
	algbw, busbw float64
	wrong        int
}

// measure runs op at count elements per rank: a correctness check, warm-up,
// then nccl-tests' batch timing (iters ops back to back, all ranks, mean)
// and a per-op latency (barrier-free: one op, wait, next).
func (c *benchCmd) measure(w *world, op string, dt gpu.DType, count int) (result, error) {
	n := len(w.groups)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	inputs := make([]*array.Array, n)
	for r := range n {
		var err error
		if inputs[r], err = array.Arange(w.s[r], count, dt, float64(r%3), 0); err != nil {
			return result{}, err
		}
	}
	defer func() {
		for _, x := range inputs {
			_ = x.Free()
		}
	}()
	inplace := op == "allreduce_inplace"
	free := func(outs []*array.Array) {
		if !inplace { // in place, the outputs are the inputs
			freeAll(outs)
		}
	}
	// One op on every rank; returns each rank's output. Every op returns at
	// once (the work happens on the ranks' streams), so one goroutine can
	// start it on all ranks.
	once := func() ([]*array.Array, error) {
		outs := make([]*array.Array, n)
		for r := range n {
			var err error
			if outs[r], err = runOp(w, op, r, inputs[r], count, dt); err != nil {
				return nil, err
			}
			if inplace {
				inputs[r] = outs[r] // the next op donates the result again
			}
		}
		return outs, nil
	}
	waitAll := func(outs []*array.Array) error {
		for _, o := range outs {
			if o == nil {
				continue
			}
			if err := o.Wait(ctx); err != nil {
				return err
			}
		}
		if op == "sendrecv" { // a Send has no output: the group says when it is done
			for _, g := range w.groups {
				if err := g.Wait(ctx); err != nil {
					return err
				}
			}
		}
		return nil
	}
	outs, err := once()
	if err != nil {
		return result{}, err
	}
	if err := waitAll(outs); err != nil {
		return result{}, err
	}
	wrong, err := check(ctx, op, outs, n, count, dt)
	if err != nil {
		return result{}, err
	}
	free(outs)
	warm, timed := iterations(count * dt.Size())
	if c.Iters > 0 {
		timed = c.Iters
	}
	// Ops issued back to back, at most window in flight (each op's output
	// is a new array, so an unbounded batch would hold them all). The
	// warm-up runs this way too, so that the buffers the timed batch keeps
	// in flight (staging, outputs) exist before the clock starts.
	const window = 2
	batch := func(iters int) error {
		var inflight [][]*array.Array
		for range iters {
			if len(inflight) == window {
				if err := waitAll(inflight[0]); err != nil {
					return err
				}
				free(inflight[0])
				inflight = inflight[1:]
			}
			outs, err := once()
			if err != nil {
				return err
			}
			inflight = append(inflight, outs)
		}
		for _, outs := range inflight {
			if err := waitAll(outs); err != nil {
				return err
			}
			free(outs)
		}
		return nil
	}
	if err := batch(max(warm, 2*window)); err != nil {
		return result{}, err
	}
	// Latency: one op at a time.
	lat := make([]time.Duration, 0, timed)
	for range timed {
		t0 := time.Now()
		if outs, err = once(); err != nil {
			return result{}, err
		}
		if err := waitAll(outs); err != nil {
			return result{}, err
		}
		lat = append(lat, time.Since(t0))
		free(outs)
	}
	slices.Sort(lat)
	// Batch: nccl-tests' timing.
	t0 := time.Now()
	if err := batch(timed); err != nil {
		return result{}, err
	}
	perOp := time.Since(t0) / time.Duration(timed)
	bytes := float64(count * dt.Size())
	if op == "allgather" {
		bytes *= float64(n) // nccl-tests: the size of the gathered output
	}
	algbw := bytes / perOp.Seconds() / 1e9
	return result{batch: perOp, p50: lat[len(lat)/2], algbw: algbw, busbw: algbw * busFactor(op, n), wrong: wrong}, nil
}

func freeAll(outs []*array.Array) {
	for _, o := range outs {
		if o != nil {
			_ = o.Free()
		}
	}
}

// busFactor is nccl-tests' bus bandwidth factor.
func busFactor(op string, n int) float64 {
	switch op {
	case "allreduce", "allreduce_inplace":
		return 2 * float64(n-1) / float64(n)
	case "allgather", "reducescatter":
		return float64(n-1) / float64(n)
	}
	return 1
}

// runOp starts op on rank r; send/recv pairs ranks 2i and 2i+1.
func runOp(w *world, op string, r int, x *array.Array, count int, dt gpu.DType) (*array.Array, error) {
	g, s := w.groups[r], w.s[r]
	switch op {
	case "allreduce":
		return g.AllReduce(s, x, collectives.Sum)
	case "allreduce_inplace": // the output takes over the input's buffer
		return g.AllReduce(s, x, collectives.Sum, collectives.Donate())
	case "allgather":
		return g.AllGather(s, x)
	case "reducescatter":
		return g.ReduceScatter(s, x, collectives.Sum)
	case "broadcast":
		return g.Broadcast(s, x, 0)
	case "sendrecv":
		peer := r ^ 1
		if peer >= len(w.groups) {
			return nil, nil
		}
		if r%2 == 0 {
			return nil, g.Send(s, x, peer)
		}
		return g.Recv(s, []int{count}, dt, peer)
	}
	return nil, fmt.Errorf("unknown op %q", op)
}

// check counts wrong elements (rank r's input is all r%3).
func check(ctx context.Context, op string, outs []*array.Array, n, count int, dt gpu.DType) (int, error) {
	sum := 0.0
	for r := range n {
		sum += float64(r % 3)
	}
	wrong := 0
	for r, o := range outs {
		if o == nil {
			continue
		}
		vals, err := array.ToFloat64(ctx, o)
		if err != nil {
			return 0, err
		}
		for i, v := range vals {
			var want float64
			switch op {
			case "allreduce", "allreduce_inplace", "reducescatter":
				want = sum
			case "allgather":
				want = float64((i / count) % 3)
			case "broadcast":
				want = 0
			case "sendrecv":
				want = float64((r ^ 1) % 3)
			}
			if v != want {
				wrong++
			}
		}
	}
	return wrong, nil
}

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

// latency is the 2-rank, 1-element float32 all-reduce, end to end through
// the fence and both streams: p50 and p90 over 2000 ops.
func latency(log *zap.Logger, backend string, timeout time.Duration) ([2]time.Duration, error) {
	w, err := newWorld(log, backend, 2, timeout)
	if err != nil {
		return [2]time.Duration{}, err
	}
	defer w.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	xs := make([]*array.Array, 2)
	for r := range 2 {
		if xs[r], err = array.Full(w.s[r], []int{1}, gpu.Float32, 1); err != nil {
			return [2]time.Duration{}, err
		}
		if err := xs[r].Wait(ctx); err != nil {
			return [2]time.Duration{}, err
		}
	}
	var lat []time.Duration
	for i := range 2200 {
		t0 := time.Now()
		y0, err0 := w.groups[0].AllReduce(w.s[0], xs[0], collectives.Sum)
		y1, err1 := w.groups[1].AllReduce(w.s[1], xs[1], collectives.Sum)
		if err0 != nil || err1 != nil {
			return [2]time.Duration{}, fmt.Errorf("latency: %v %v", err0, err1)
		}
		if err := y0.Wait(ctx); err != nil {
			return [2]time.Duration{}, err
		}
		if err := y1.Wait(ctx); err != nil {
			return [2]time.Duration{}, err
		}
		if i >= 200 {
			lat = append(lat, time.Since(t0))
		}
	}
	slices.Sort(lat)
	return [2]time.Duration{lat[len(lat)/2], lat[len(lat)*9/10]}, nil
}
