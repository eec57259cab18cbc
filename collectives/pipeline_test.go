package collectives_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// stagedDevice is the test backend's device if the CPU cannot see its
// device memory (cuda, sim-staged), else a sim-staged one: large staged
// all-reduces run as a pipeline of parts, which only staging does.
func stagedDevice(t *testing.T) gpu.Device {
	dev := testenv.Device(t)
	if !dev.Properties().HostVisibleDeviceMem {
		return dev
	}
	dev, err := gpu.Open("sim-staged")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	return dev
}

// TestStagedAllReduceInParts: staged all-reduces of 2 to 4 pipeline parts
// (with an uneven last part), out of place and donated, give the
// reference result on every rank, and their fence steps show the parts:
// per part, the GPU's input update and the CPU's wait, the CPU's output
// update and the GPU's wait. The plain run keeps the int32 case (3 parts,
// an uneven last one, donated) and leaves out float32 (2 parts: a float32
// all-reduce in 2 parts stays in TestPartsAcrossStagedAndVisibleDevices)
// and bfloat16 (a large bfloat16 all-reduce stays in
// TestAllReduceLarge); CHOREO_TEST_FULL=1 runs them.
func TestStagedAllReduceInParts(t *testing.T) {
	const part = 8 << 20 // the pipeline's part size
	steps := make(chan int, 16)
	// The ranks' large inputs are made one after the other while the first
	// rank's collective already runs: a deadline a loaded CI never reaches
	// (60 s was reached by the int32 case on a 2-core machine with two
	// busy loops and other test runs beside it).
	w := newWorldOn(t, stagedDevice(t), 3, collectives.WithTimeout(5*time.Minute), collectives.WithOpHook(func(e collectives.TraceEvent) {
		if e.Rank == 0 {
			steps <- len(e.Steps)
		}
	}))
	for _, c := range []struct {
		dt    gpu.DType
		count int
		parts int
		opts  []collectives.CallOption
	}{
		{gpu.Float32, 2*part/4 + 5, 2, nil},
		{gpu.Int32, 3*part/4 + 1, 3, []collectives.CallOption{collectives.Donate()}},
		{gpu.BFloat16, 2*part/2 + 3, 2, nil},
	} {
		t.Run(c.dt.String(), func(t *testing.T) {
			testenv.Sliced(t, c.dt == gpu.Int32)
			runAllReduce(t, w, c.dt, collectives.Sum, c.count, c.opts...)
			select {
			case n := <-steps:
				if n != 4*c.parts {
					t.Fatalf("%d fence steps, want %d (%d parts)", n, 4*c.parts, c.parts)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("no trace event")
			}
		})
	}
}

// TestStagedPartsShapeMismatch: ranks whose payloads split into
// different numbers of parts, or one split and one whole, fail with
// ErrShapeMismatch at the first match, not at the deadline, and the group
// stays usable (an all-reduce just above algo.DefaultSmallBytes: the
// ring).
func TestStagedPartsShapeMismatch(t *testing.T) {
	w := newWorldOn(t, stagedDevice(t), 2, collectives.WithTimeout(30*time.Second))
	for _, c := range []struct {
		name   string
		counts [2]int
		dtypes [2]gpu.DType
	}{
		{"2-vs-3-parts", [2]int{4 << 20, 6 << 20}, [2]gpu.DType{gpu.Float32, gpu.Float32}},
		{"parts-vs-whole", [2]int{4 << 20, 1 << 20}, [2]gpu.DType{gpu.Float32, gpu.Float32}},
		{"dtype", [2]int{4 << 20, 4 << 20}, [2]gpu.DType{gpu.Float32, gpu.Float16}},
	} {
		t.Run(c.name, func(t *testing.T) {
			outs := make([]*array.Array, 2)
			for r := range 2 {
				x, err := array.Full(w.s[r], []int{c.counts[r]}, c.dtypes[r], 1)
				if err != nil {
					t.Fatal(err)
				}
				if outs[r], err = w.groups[r].AllReduce(w.s[r], x, collectives.Sum); err != nil {
					t.Fatalf("rank %d: launch: %v", r, err)
				}
			}
			for r, y := range outs {
				err := y.Wait(testenv.Ctx(t, 60*time.Second))
				if !errors.Is(err, collectives.ErrShapeMismatch) || errors.Is(err, collectives.ErrTimeout) {
					t.Fatalf("rank %d: got %v, want ErrShapeMismatch (not the deadline)", r, err)
				}
			}
			runAllReduce(t, w, gpu.Float32, collectives.Sum, 1<<16+1) // still usable
		})
	}
}

// TestPartsAcrossStagedAndVisibleDevices: the split depends on the
// descriptor alone, so a rank whose device memory is staged and one whose
// is not run the same parts and meet.
func TestPartsAcrossStagedAndVisibleDevices(t *testing.T) {
	rt := testenv.Runtime(t)
	// 3.6 s alone under -race; the deadline leaves room for a loaded CI.
	gs, err := collectives.Local(rt, 2, collectives.WithTimeout(40*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{rt: rt, groups: gs}
	for _, name := range []string{"sim", "sim-staged"} {
		dev, err := gpu.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dev.Close() })
		w.s = append(w.s, testenv.Stream(t, rt, dev))
	}
	runAllReduce(t, w, gpu.Float32, collectives.Sum, 4<<20+1) // 2 parts
}

// TestPartsPeerAbortedWhenOutputSideFails: a rank whose GPU stream closes
// in the middle of a pipelined all-reduce aborts the collective, so its
// peer fails promptly rather than at its deadline.
func TestPartsPeerAbortedWhenOutputSideFails(t *testing.T) {
	dev := stagedDevice(t)
	// A runtime of its own: closing it reports the stream this test closes
	// with work in flight, as it should.
	rt, err := actors.NewRuntime()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	// A deadline far beyond the test's: rank 0 must give up because its
	// stream closed, not because rank 1 came late (on a loaded machine
	// rank 1's 16 MiB input took more than the 5 s this once was).
	gs, err := collectives.Local(rt, 2, collectives.WithTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{rt: rt, dev: dev, groups: gs}
	for range 2 {
		w.s = append(w.s, testenv.Stream(t, rt, dev))
	}
	x0, err := array.Full(w.s[0], []int{4 << 20}, gpu.Float32, 1)
	if err != nil {
		t.Fatal(err)
	}
	y0, err := w.groups[0].AllReduce(w.s[0], x0, collectives.Sum)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // rank 0 stages its input, then waits for rank 1
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_ = w.s[0].Close(ctx) // its output side's waits are released: the fence fails
	cancel()
	x1, err := array.Full(w.s[1], []int{4 << 20}, gpu.Float32, 1)
	if err != nil {
		t.Fatal(err)
	}
	y1, err := w.groups[1].AllReduce(w.s[1], x1, collectives.Sum)
	if err != nil {
		t.Fatal(err)
	}
	err = y1.Wait(testenv.Ctx(t, 90*time.Second))
	if err == nil {
		t.Fatal("rank 1 succeeded although rank 0 left the collective")
	}
	if !errors.Is(err, collectives.ErrAborted) || errors.Is(err, collectives.ErrTimeout) {
		t.Fatalf("rank 1: %v, want rank 0's abort (not its own deadline)", err)
	}
	if err := y0.Wait(testenv.Ctx(t, 90*time.Second)); err == nil {
		t.Fatal("rank 0's output succeeded although its stream closed")
	}
}
