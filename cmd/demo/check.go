package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// nodeCheckCmd is the joined rank's self-check, what the integration
// tests (test/) run across processes. Each scenario prints one line per
// step, "CHECK <step> ok" or "CHECK <step> FAIL <sentinel> <error>", and a
// last line "CHECK done ok=<n> failed=<m> live-fences=<k>"; the command
// fails when a step failed.
//   - matrix: across processes, all-reduce of every dtype (sum, min,
//     max, prod) over 1, 7, 10 and 1024 elements and 1024x1024 float32;
//     all-gather, reduce-scatter, broadcast (first and last root),
//     send/recv around the ring; all-to-all (even, and uneven with zero
//     counts), gather and scatter (first and last root), reduce to a root
//     and a Batch around the ring both ways, every dtype at 0, 1, 7 and
//     1024 elements per block and float32 at 1024x1024 (check_exchange.go);
//     barrier.
//   - soak: all-reduce Size-byte float32 arrays Iters times, printing
//     "SOAK <k>" after each; the first failure ends it (one FAIL line,
//     with how long the failed step took).
//   - mismatch: rank r all-reduces 100+r elements: every rank must fail
//     with ErrShapeMismatch (the step is ok when it does).
//   - mismatch-alltoallv: an all-to-all whose last rank expects one row
//     fewer from rank 0 than rank 0 sends it: every rank must fail with
//     ErrShapeMismatch.
//
// A failure that leaves the group unusable (a peer lost, a deadline
// passed, the group closed) ends the scenario: the steps left would each
// wait out their deadline.
type nodeCheckCmd struct {
	Scenario string        `arg:"" enum:"matrix,soak,mismatch,mismatch-alltoallv" help:"matrix, soak, mismatch or mismatch-alltoallv."`
	Size     sizeFlag      `help:"Soak: bytes per all-reduce." default:"64MiB"`
	Iters    int           `help:"Soak: all-reduces." default:"100"`
	Backend  string        `help:"GPU backend: auto, sim, cuda, metal." default:"auto"`
	Timeout  time.Duration `help:"Deadline of each collective." default:"30s"`
}

// Run joins and runs the scenario.
func (c *nodeCheckCmd) Run(g *globals) error {
	w, err := joinWorld(g.log, c.Backend, c.Timeout, obsFlags{})
	if err != nil {
		return err
	}
	defer w.close()
	k := &checker{g: w.groups[0], s: w.s[0], timeout: c.Timeout}
	switch c.Scenario {
	case "matrix":
		k.matrix()
	case "soak":
		k.soak(int(c.Size), c.Iters)
	case "mismatch":
		k.mismatch()
	case "mismatch-alltoallv":
		k.mismatchAllToAllV()
	}
	if k.failed == 0 {
		if err := w.finish(c.Timeout); err != nil {
			k.fail("finish", err)
		}
	}
	live := -1
	if m, err := fence.For(w.rt); err == nil {
		// The last collective's fences end when its comm task is done, a
		// moment after its output is ready: give that moment.
		live = m.Live()
		for deadline := time.Now().Add(time.Second); live != 0 && time.Now().Before(deadline); live = m.Live() {
			time.Sleep(time.Millisecond)
		}
	}
	fmt.Printf("CHECK done ok=%d failed=%d live-fences=%d\n", k.ok, k.failed, live)
	if k.failed > 0 {
		return fmt.Errorf("check %s: %d steps failed, the first: %w", c.Scenario, k.failed, k.first)
	}
	return nil
}

// checker runs steps on one joined rank and counts their outcomes.
type checker struct {
	g          *collectives.Group
	s          *streams.GPU
	timeout    time.Duration
	ok, failed int
	first      error // the first failure
	broken     bool  // a failure left the group unusable: the steps left are skipped
}

func (k *checker) pass(step string) {
	k.ok++
	fmt.Printf("CHECK %s ok\n", step)
}

func (k *checker) fail(step string, err error) {
	k.failed++
	k.broken = k.broken || breaksGroup(err)
	if k.first == nil {
		k.first = fmt.Errorf("%s: %w", step, err)
	}
	fmt.Printf("CHECK %s FAIL %s %v\n", step, sentinelName(err), err)
}

// breaksGroup reports whether err leaves the group unusable (a peer lost,
// a deadline passed, the group closed): every later step would fail too,
// each after waiting out its deadline, so the scenario stops there and
// the rank exits within a bounded time of the failure.
func breaksGroup(err error) bool {
	return errors.Is(err, collectives.ErrPeerLost) || errors.Is(err, collectives.ErrTimeout) ||
		errors.Is(err, collectives.ErrClosed)
}

// sentinelName names the public sentinel err matches, most specific first.
func sentinelName(err error) string {
	for _, s := range []struct {
		name string
		err  error
	}{{"ErrPeerLost", collectives.ErrPeerLost}, {"ErrShapeMismatch", collectives.ErrShapeMismatch},
		{"ErrMismatch", collectives.ErrMismatch}, {"ErrTimeout", collectives.ErrTimeout},
		{"ErrAborted", collectives.ErrAborted}, {"ErrClosed", collectives.ErrClosed},
		{"ErrBadArgument", collectives.ErrBadArgument}} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "other"
}

// ctx bounds one step's reads.
func (k *checker) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), k.timeout+5*time.Second)
}

// input is rank r's input of a step: r+1, r+2, ... (wrapping in the
// narrow integer types), or all 1+r%2 for a product, which would overflow.
func (k *checker) input(r, count int, dt gpu.DType, op collectives.Op) (*array.Array, error) {
	if op == collectives.Prod {
		return array.Full(k.s, []int{count}, dt, float64(1+r%2))
	}
	return array.Arange(k.s, count, dt, float64(r+1), 1)
}

// values reads a's elements.
func (k *checker) values(a *array.Array) ([]float64, error) {
	ctx, cancel := k.ctx()
	defer cancel()
	defer func() { _ = a.Free() }()
	return array.ToFloat64(ctx, a)
}

// inputs returns every rank's input as this rank builds it (each rank's
// is a function of its rank alone).
func (k *checker) inputs(count int, dt gpu.DType, op collectives.Op) ([][]float64, error) {
	out := make([][]float64, k.g.Size())
	for r := range out {
		x, err := k.input(r, count, dt, op)
		if err == nil {
			out[r], err = k.values(x)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// reduce is the reference reduction of ins by op, in float64, wrapped to
// dt's integers.
func reduce(dt gpu.DType, op collectives.Op, ins [][]float64) []float64 {
	out := append([]float64(nil), ins[0]...)
	for _, in := range ins[1:] {
		for i, v := range in {
			switch op {
			case collectives.Sum:
				out[i] += v
			case collectives.Prod:
				out[i] *= v
			case collectives.Min:
				out[i] = math.Min(out[i], v)
			case collectives.Max:
				out[i] = math.Max(out[i], v)
			}
		}
	}
	if !dt.IsFloat() {
		for i, v := range out {
			out[i] = float64(dt.Wrap(int64(v)))
		}
	}
	return out
}

// tolerance is the relative error bound for dt: 0 (exact) for integers.
func tolerance(dt gpu.DType) float64 {
	switch dt {
	case gpu.Float16:
		return 5e-3
	case gpu.BFloat16:
		return 1e-1
	case gpu.Float32, gpu.Float64:
		return 1e-6
	}
	return 0
}

// compare checks got against want within dt's tolerance.
func compare(dt gpu.DType, got, want []float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d elements, want %d", len(got), len(want))
	}
	tol := tolerance(dt)
	for i := range got {
		if d := math.Abs(got[i] - want[i]); d > tol*math.Max(math.Abs(want[i]), 1) {
			return fmt.Errorf("element %d: %v, want %v", i, got[i], want[i])
		}
	}
	return nil
}
