package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
)

// runFlags are the training-like loop's settings; every rank of a launch
// gets the same (args).
type runFlags struct {
	Steps   int           `help:"Training steps." default:"50"`
	Size    sizeFlag      `help:"Gradient size per rank in bytes (e.g. 1MiB)." default:"1MiB"`
	DType   string        `name:"dtype" help:"Element type: float32, float64, float16, bfloat16, int8, int16, int32, int64, uint8." default:"float32"`
	Backend string        `help:"GPU backend: auto, sim, cuda, metal." default:"auto"`
	Timeout time.Duration `help:"Deadline of each collective." default:"30s"`
	elasticFlags
}

// args is f as flags of `demo node run`.
func (f *runFlags) args() []string {
	return append([]string{"--steps=" + strconv.Itoa(f.Steps), "--size=" + strconv.FormatUint(uint64(f.Size), 10),
		"--dtype=" + f.DType, "--backend=" + f.Backend, "--timeout=" + f.Timeout.String()}, f.elasticFlags.args()...)
}

// runCmd is the main job: the training-like loop over ranks that are
// processes (demo launch -n ranks run) or, with --inproc, in-process ranks.
type runCmd struct {
	Ranks  int  `short:"n" help:"Ranks: processes of one rank each, or in-process ranks with --inproc (-np is the same)." default:"4"`
	Inproc bool `help:"Hold every rank in this process (collectives.Local) instead of launching processes."`
	runFlags
	obsFlags
}

// Run launches the ranks, or runs them here with --inproc.
func (c *runCmd) Run(g *globals) error {
	if _, _, err := c.shape(); err != nil {
		return err
	}
	if c.Elastic && c.Inproc {
		return errors.New("--elastic needs ranks in processes (a rank is lost by its process's death): drop --inproc")
	}
	if !c.Inproc {
		return launchNodes(g, c.Ranks, append([]string{"run"}, c.args()...), launchSpec{obs: c.obsFlags, elastic: c.Elastic})
	}
	w, err := newObservedWorld(g.log, c.Backend, c.Ranks, c.Timeout, c.obsFlags)
	if err != nil {
		return err
	}
	defer w.close()
	err = c.loop(w)
	w.obs.linger(c.MetricsLinger)
	return err
}

// stepValue is rank r's gradient value at step k: small integers, exact in
// every dtype (int8 included) and when summed over ranks.
func stepValue(r, k int) float64 { return float64((r + 1) * (k%3 + 1)) }

// shape is the gradient's dtype and element count.
func (f *runFlags) shape() (gpu.DType, int, error) {
	dt, err := gpu.ParseDType(f.DType)
	if err != nil {
		return dt, 0, err
	}
	if f.Steps < 1 {
		return dt, 0, fmt.Errorf("steps must be >= 1, got %d", f.Steps)
	}
	elems := int(f.Size) / dt.Size()
	if elems < 1 {
		return dt, 0, fmt.Errorf("size %d bytes holds no %s element", f.Size, dt)
	}
	return dt, elems, f.elasticFlags.check(f.Steps)
}

// tally is a held rank's checks.
type tally struct {
	passed, checks int64
	first          error // the first failed check
}

// loop runs the steps on w's held ranks: each fills its gradient on its
// GPU stream, all-reduces it (sum), scales it by 1/size, and checks every
// element of both. The lead prints the summary: its own timings (all held
// ranks done) and every rank's checks. A rank whose check failed returns
// the first failure.
func (f *runFlags) loop(w *world) error {
	dt, elems, err := f.shape()
	if err != nil {
		return err
	}
	if w.lead() {
		fmt.Printf("choreo demo: %s, %d steps, %s gradients (%d x %s)\n",
			w.describe(), f.Steps, humanize.IBytes(uint64(elems*dt.Size())), elems, dt)
	}
	bar := f.progress(w)
	var lines *stepProgress
	if bar == nil && w.lead() {
		lines = newStepProgress(os.Stderr, f.Steps)
	}
	tallies := make([]tally, len(w.groups))
	var allreduce, scale, step []time.Duration
	for k := range f.Steps {
		tReduce, tStep, err := f.step(w, k, dt, elems, tallies)
		if err != nil {
			return fmt.Errorf("step %d: %w", k, err)
		}
		allreduce, scale, step = append(allreduce, tReduce), append(scale, tStep-tReduce), append(step, tStep)
		if bar != nil {
			_ = bar.Add(1)
		}
		lines.done(k + 1)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	return f.report(w, tallies, []summaryRow{
		{"fill+allreduce(sum)", allreduce, float64(elems * dt.Size()), 2 * float64(w.size-1) / float64(w.size)},
		{"scale", scale, 0, 0},
		{"step", step, 0, 0},
	})
}

// progress is a progress bar on the lead's terminal for long runs, or nil
// (then the lead prints progress lines).
func (f *runFlags) progress(w *world) *progressbar.ProgressBar {
	if f.Steps < 20 || !w.lead() || !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	return progressbar.NewOptions(f.Steps, progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription("steps"), progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
}

// step runs step k on every held rank and checks its outputs into tallies;
// it returns when the all-reduces were done on every held rank and when
// the step was.
func (f *runFlags) step(w *world, k int, dt gpu.DType, elems int, tallies []tally) (tReduce, tStep time.Duration, err error) {
	t0 := time.Now()
	n := len(w.groups)
	sums, means := make([]*array.Array, n), make([]*array.Array, n)
	defer func() {
		freeAll(sums)
		freeAll(means)
	}()
	err = w.each(func(i int) error { // each rank from its own goroutine, as from its own process
		s, g := w.s[i], w.groups[i]
		grad, err := array.Full(s, []int{elems}, dt, stepValue(g.Rank(), k))
		if err == nil {
			sums[i], err = g.AllReduce(s, grad, collectives.Sum, collectives.Donate())
		}
		if err == nil {
			means[i], err = array.Scale(s, sums[i], 1/float64(w.size))
		}
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout+5*time.Second)
	defer cancel()
	for i, y := range sums {
		if err := y.Wait(ctx); err != nil {
			return 0, 0, fmt.Errorf("rank %d: all-reduce: %w", w.groups[i].Rank(), err)
		}
	}
	tReduce = time.Since(t0)
	for i, y := range means {
		if err := y.Wait(ctx); err != nil {
			return 0, 0, fmt.Errorf("rank %d: scale: %w", w.groups[i].Rank(), err)
		}
	}
	tStep = time.Since(t0)
	sum := 0.0
	for r := range w.size {
		sum += stepValue(r, k)
	}
	for i := range n {
		t := &tallies[i]
		for _, c := range []struct {
			a    *array.Array
			want float64
			what string
		}{{sums[i], sum, "sum"}, {means[i], meanOf(dt, sum, w.size), "mean"}} {
			t.checks++
			vals, err := array.ToFloat64(ctx, c.a)
			if err == nil {
				err = checkAll(vals, c.want, dt)
			}
			if err == nil {
				t.passed++
			} else if t.first == nil {
				t.first = fmt.Errorf("step %d rank %d %s: %w", k, w.groups[i].Rank(), c.what, err)
			}
		}
	}
	return tReduce, tStep, nil
}

// report adds up every rank's checks; the lead prints the summary.
func (f *runFlags) report(w *world, tallies []tally, rows []summaryRow) error {
	counts := make([][]int64, len(tallies))
	for i, t := range tallies {
		counts[i] = []int64{t.passed, t.checks}
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout+5*time.Second)
	defer cancel()
	total, err := w.sum(ctx, counts)
	if err != nil {
		return err
	}
	if w.lead() {
		printSummary(os.Stdout, rows)
		fmt.Printf("checks passed: %d/%d (every rank's)\n", total[0], total[1])
	}
	for _, t := range tallies { // a rank whose check failed fails (a launcher names it)
		if t.first != nil {
			return fmt.Errorf("check failed: %w", t.first)
		}
	}
	return nil
}

// meanOf is what Scale(sum, 1/n) gives for dt: integers truncate toward zero.
func meanOf(dt gpu.DType, sum float64, n int) float64 {
	m := sum * (1 / float64(n))
	if !dt.IsFloat() {
		return math.Trunc(m)
	}
	return m
}

// checkAll compares every element with want: exactly for integers, within
// the dtype's rounding for floats.
func checkAll(vals []float64, want float64, dt gpu.DType) error {
	tol := map[gpu.DType]float64{gpu.Float32: 1e-6, gpu.Float64: 1e-12, gpu.Float16: 1e-3, gpu.BFloat16: 8e-3}[dt]
	for i, v := range vals {
		if math.Abs(v-want) > tol*math.Max(1, math.Abs(want)) {
			return fmt.Errorf("element %d = %v, want %v", i, v, want)
		}
	}
	return nil
}
