package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/schollz/progressbar/v3"
	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
)

// runCmd is the main job: a training-like loop over in-process ranks.
type runCmd struct {
	Ranks   int           `help:"In-process ranks." default:"4"`
	Steps   int           `help:"Training steps." default:"50"`
	Size    sizeFlag      `help:"Gradient size per rank in bytes (e.g. 1MiB)." default:"1MiB"`
	DType   string        `name:"dtype" help:"Element type: float32, float64, float16, bfloat16, int8, int16, int32, int64, uint8." default:"float32"`
	Backend string        `help:"GPU backend: auto, sim, cuda, metal." default:"auto"`
	Timeout time.Duration `help:"Deadline of each collective." default:"30s"`
}

// stepValue is rank r's gradient value at step k: small integers, exact in
// every dtype (int8 included) and when summed over ranks.
func stepValue(r, k int) float64 { return float64((r + 1) * (k%3 + 1)) }

// Run executes the loop: each rank fills its gradient on its GPU stream,
// all-reduces it (sum), scales it by 1/ranks, and checks every element.
func (c *runCmd) Run(log *zap.Logger) error {
	dt, err := gpu.ParseDType(c.DType)
	if err != nil {
		return err
	}
	if c.Steps < 1 {
		return fmt.Errorf("steps must be >= 1, got %d", c.Steps)
	}
	elems := int(c.Size) / dt.Size()
	if elems < 1 {
		return fmt.Errorf("size %d bytes holds no %s element", c.Size, dt)
	}
	w, err := newWorld(log, c.Backend, c.Ranks, c.Timeout)
	if err != nil {
		return err
	}
	defer w.close()
	fmt.Printf("choreo demo: %d ranks on %s, %d steps, %s gradients (%d x %s)\n",
		c.Ranks, w.describe(), c.Steps, humanize.IBytes(uint64(elems*dt.Size())), elems, dt)

	var bar *progressbar.ProgressBar
	if c.Steps >= 20 && term.IsTerminal(int(os.Stderr.Fd())) {
		bar = progressbar.NewOptions(c.Steps, progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("steps"), progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
	}
	var allreduce, scale, step []time.Duration
	checks, passed := 0, 0
	var firstErr error
	for k := range c.Steps {
		t0 := time.Now()
		sums := make([]*array.Array, c.Ranks)
		means := make([]*array.Array, c.Ranks)
		var wg sync.WaitGroup
		errs := make([]error, c.Ranks)
		for r := range c.Ranks {
			wg.Add(1)
			go func() { // each rank is its own goroutine, as it would be its own process
				defer wg.Done()
				s, g := w.s[r], w.groups[r]
				grad, err := array.Full(s, []int{elems}, dt, stepValue(r, k))
				if err == nil {
					sums[r], err = g.AllReduce(s, grad, collectives.Sum, collectives.Donate())
				}
				if err == nil {
					means[r], err = array.Scale(s, sums[r], 1/float64(c.Ranks))
				}
				errs[r] = err
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("step %d: %w", k, err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.Timeout+5*time.Second)
		tReduce := time.Duration(0)
		for r := range c.Ranks {
			if err := sums[r].Wait(ctx); err != nil {
				cancel()
				return fmt.Errorf("step %d rank %d: all-reduce: %w", k, r, err)
			}
		}
		tReduce = time.Since(t0)
		for r := range c.Ranks {
			if err := means[r].Wait(ctx); err != nil {
				cancel()
				return fmt.Errorf("step %d rank %d: scale: %w", k, r, err)
			}
		}
		tStep := time.Since(t0)
		// Check every element of every rank's sum and mean.
		sum := 0.0
		for r := range c.Ranks {
			sum += stepValue(r, k)
		}
		wantMean := meanOf(dt, sum, c.Ranks)
		for r := range c.Ranks {
			for _, chk := range []struct {
				a    *array.Array
				want float64
				what string
			}{{sums[r], sum, "sum"}, {means[r], wantMean, "mean"}} {
				checks++
				vals, err := array.ToFloat64(ctx, chk.a)
				if err == nil {
					err = checkAll(vals, chk.want, dt)
				}
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("step %d rank %d %s: %w", k, r, chk.what, err)
					}
					continue
				}
				passed++
			}
			_ = sums[r].Free()
			_ = means[r].Free()
		}
		cancel()
		allreduce = append(allreduce, tReduce)
		scale = append(scale, tStep-tReduce)
		step = append(step, tStep)
		if bar != nil {
			_ = bar.Add(1)
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	nbytes := float64(elems * dt.Size())
	busFactor := 2 * float64(c.Ranks-1) / float64(c.Ranks)
	printSummary(os.Stdout, []summaryRow{
		{"fill+allreduce(sum)", allreduce, nbytes, busFactor},
		{"scale", scale, 0, 0},
		{"step", step, 0, 0},
	})
	fmt.Printf("checks passed: %d/%d\n", passed, checks)
	if firstErr != nil {
		return fmt.Errorf("check failed: %w", firstErr)
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
