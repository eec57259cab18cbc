package collectives_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/choreotest"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// TestDevicePathMatrix: all-reduce (every op, in place and not, small and
// partitioned), all-gather, reduce-scatter, broadcast and all-to-all on the
// device-resident path, 2-4 ranks, every dtype, sizes 0, 1, 7, 1024 and
// 1024x1024 elements; results as on the host path (integers exact, floats
// within the per-dtype relative error bounds of tolerance). The
// plain run takes the 1024x1024 case on 3 ranks only (uneven partitions);
// CHOREO_TEST_FULL=1 on every rank count.
func TestDevicePathMatrix(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		w := newWorld(t, n, collectives.WithDataPath(collectives.DataPathDevice), collectives.WithTimeout(60*time.Second))
		for _, dt := range gpu.DTypes {
			sizes := []int{0, 1, 7, 1024}
			if dt == gpu.Float32 {
				sizes = append(sizes, 1024*1024) // above deviceSmallBytes: the partitioned kernels
			}
			for _, count := range sizes {
				t.Run(fmt.Sprintf("n%d/%s/%d", n, dt, count), func(t *testing.T) {
					testenv.Sliced(t, count < 1024*1024 || n == 3)
					deviceCase(t, w, n, dt, count)
				})
			}
		}
	}
}

// TestDevicePathAcrossProcessesMatrix: the same on the path for ranks in
// separate processes (groups marked so, on in-process ranks): the ranks
// export their buffers (the sim's IPC stays within its process), meet over
// messages, and run their kernels on the group's side queue.
func TestDevicePathAcrossProcessesMatrix(t *testing.T) {
	for _, n := range []int{2, 3} {
		w := newWorld(t, n, collectives.WithDataPath(collectives.DataPathDevice), collectives.WithProcesses(),
			collectives.WithTimeout(60*time.Second))
		ipc, ok := w.dev.(gpu.IPCDevice)
		if !ok {
			t.Skipf("%s shares no memory across processes", w.dev.Properties().Backend)
		}
		if err := importOwnExport(w.dev, ipc); err != nil {
			t.Skipf("%s opens no export of this process (%v): test/'s TestMatrixOnGPU runs this path across real processes",
				w.dev.Properties().Backend, err)
		}
		for _, dt := range []gpu.DType{gpu.Float32, gpu.BFloat16, gpu.Int32, gpu.Uint8} {
			for _, count := range []int{0, 1, 7, 1024} {
				t.Run(fmt.Sprintf("n%d/%s/%d", n, dt, count), func(t *testing.T) {
					deviceCase(t, w, n, dt, count)
				})
			}
		}
	}
}

func deviceCase(t *testing.T, w *world, n int, dt gpu.DType, count int) {
	ops := []collectives.Op{collectives.Sum, collectives.Prod, collectives.Min, collectives.Max}
	op := ops[count%4]
	root := count % n
	ins := make([][]float64, n)
	ar, arIn, ag, rs, bc := make([]*array.Array, n), make([]*array.Array, n), make([]*array.Array, n), make([]*array.Array, n), make([]*array.Array, n)
	a2a, a2aIn := make([]*array.Array, n), make([][]float64, n)
	for r := range n {
		g, s := w.groups[r], w.s[r]
		ins[r] = rounded(dt, input(dt, r, count))
		x := fromFloat64(t, s, dt, ins[r], count)
		var err error
		if ar[r], err = g.AllReduce(s, x, op); err != nil {
			t.Fatal(err)
		}
		if arIn[r], err = g.AllReduce(s, fromFloat64(t, s, dt, ins[r], count), op, collectives.Donate()); err != nil {
			t.Fatal(err)
		}
		if ag[r], err = g.AllGather(s, x); err != nil {
			t.Fatal(err)
		}
		if rs[r], err = g.ReduceScatter(s, x, op); err != nil {
			t.Fatal(err)
		}
		if bc[r], err = g.Broadcast(s, x, root); err != nil {
			t.Fatal(err)
		}
		a2aIn[r] = rounded(dt, input(dt, r+7, n*count))
		if a2a[r], err = g.AllToAll(s, fromFloat64(t, s, dt, a2aIn[r], n*count)); err != nil {
			t.Fatal(err)
		}
	}
	for r := range n {
		checkFive(t, dt, op, root, count, r, ins, ar[r], arIn[r], ag[r], rs[r], bc[r])
		var want []float64
		for q := range n {
			want = append(want, a2aIn[q][r*count:(r+1)*count]...)
		}
		if err := compare(dt, values(t, dt, a2a[r]), want); err != nil {
			t.Fatalf("alltoall rank %d: %v", r, err)
		}
		if err := w.groups[r].Wait(testenv.Ctx(t, 60*time.Second)); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestDevicePathFenceSteps: every rank's fence
// takes the documented steps in order, GPU side update(1) wait(2)
// update(3) wait(4), CPU side wait(1) update(2) wait(3) update(4).
func TestDevicePathFenceSteps(t *testing.T) {
	tr := choreotest.NewTracer()
	w := newWorld(t, 2, collectives.WithDataPath(collectives.DataPathDevice), tr.Option())
	outs := make([]*array.Array, 2)
	for r := range 2 {
		y, err := w.groups[r].AllReduce(w.s[r], fromFloat64(t, w.s[r], gpu.Float32, []float64{float64(r + 1)}, 1), collectives.Sum)
		if err != nil {
			t.Fatal(err)
		}
		outs[r] = y
	}
	for r := range 2 {
		if got := values(t, gpu.Float32, outs[r]); got[0] != 3 {
			t.Fatalf("rank %d: %v, want 3", r, got)
		}
		if err := w.groups[r].Wait(testenv.Ctx(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	want := []fence.Step{
		{Side: fence.GPUSide, Op: fence.OpUpdate, Value: 1}, {Side: fence.GPUSide, Op: fence.OpWait, Value: 2},
		{Side: fence.GPUSide, Op: fence.OpUpdate, Value: 3}, {Side: fence.GPUSide, Op: fence.OpWait, Value: 4},
		{Side: fence.CPUSide, Op: fence.OpWait, Value: 1}, {Side: fence.CPUSide, Op: fence.OpUpdate, Value: 2},
		{Side: fence.CPUSide, Op: fence.OpWait, Value: 3}, {Side: fence.CPUSide, Op: fence.OpUpdate, Value: 4},
	}
	for r := range 2 {
		evs := tr.Events(r)
		if len(evs) != 1 {
			t.Fatalf("rank %d: %d trace events, want 1", r, len(evs))
		}
		var gpuSide, cpuSide []fence.Step
		for _, s := range evs[0].Steps {
			if s.Side == fence.GPUSide {
				gpuSide = append(gpuSide, s)
			} else {
				cpuSide = append(cpuSide, s)
			}
		}
		if got := append(gpuSide, cpuSide...); !slices.Equal(got, want) {
			t.Fatalf("rank %d: fence steps %v, want %v", r, got, want)
		}
	}
}

// TestDevicePathFailures: shapes that differ fail every rank with
// ErrShapeMismatch; a rank on the device path meets a rank on the host
// path with ErrMismatch, not a hang; a rank that never arrives fails the
// others by the group's deadline and their GPU streams go on (the failed
// fences release their GPU waits).
// Both for ranks in one process and for ranks in separate processes.
func TestDevicePathFailures(t *testing.T) {
	for name, opts := range placements() {
		t.Run(name, func(t *testing.T) { devicePathFailures(t, opts) })
	}
}

// placements are the device path's two meetings: ranks in one process
// (a window) and ranks in separate processes (messages and IPC handles,
// simulated on in-process ranks).
func placements() map[string][]collectives.Option {
	return map[string][]collectives.Option{
		"in-process": nil,
		"processes":  {collectives.WithProcesses()},
	}
}

func devicePathFailures(t *testing.T, opts []collectives.Option) {
	w := newWorld(t, 2, append([]collectives.Option{collectives.WithDataPath(collectives.DataPathDevice), collectives.WithTimeout(2 * time.Second)}, opts...)...)
	outs := make([]*array.Array, 2)
	for r := range 2 {
		y, err := w.groups[r].AllReduce(w.s[r], fromFloat64(t, w.s[r], gpu.Float32, make([]float64, 3+r), 3+r), collectives.Sum)
		if err != nil {
			t.Fatal(err)
		}
		outs[r] = y
	}
	for r := range 2 {
		if err := outs[r].Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrShapeMismatch) {
			t.Fatalf("rank %d: %v, want ErrShapeMismatch", r, err)
		}
		w.groups[r].Wait(testenv.Ctx(t, 30*time.Second))
	}
	// An all-to-all whose ranks' blocks differ: the same.
	for r := range 2 {
		y, err := w.groups[r].AllToAll(w.s[r], fromFloat64(t, w.s[r], gpu.Int32, make([]float64, 4+2*r), 4+2*r))
		if err != nil {
			t.Fatal(err)
		}
		outs[r] = y
	}
	for r := range 2 {
		if err := outs[r].Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrShapeMismatch) {
			t.Fatalf("alltoall rank %d: %v, want ErrShapeMismatch", r, err)
		}
		w.groups[r].Wait(testenv.Ctx(t, 30*time.Second))
	}
	// Rank 1 never calls: rank 0 fails by its deadline, and its stream
	// runs what comes after.
	y, err := w.groups[0].AllReduce(w.s[0], fromFloat64(t, w.s[0], gpu.Float32, []float64{1}, 1), collectives.Sum)
	if err != nil {
		t.Fatal(err)
	}
	after := fromFloat64(t, w.s[0], gpu.Int32, []float64{7}, 1)
	if err := y.Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrTimeout) {
		t.Fatalf("lone rank: %v, want ErrTimeout", err)
	}
	if got := values(t, gpu.Int32, after); got[0] != 7 {
		t.Fatalf("the stream after a failed device collective: %v", got)
	}
}

// TestDevicePathMeetsHostPath: ranks that disagree on the data path meet
// in one window and fail with ErrMismatch on both sides, not a hang.
func TestDevicePathMeetsHostPath(t *testing.T) {
	for name, opts := range placements() {
		t.Run(name, func(t *testing.T) { devicePathMeetsHostPath(t, opts) })
	}
}

func devicePathMeetsHostPath(t *testing.T, opts []collectives.Option) {
	rt := testenv.Runtime(t)
	dev := testenv.Device(t)
	ts := transport.NewLocal(2)
	paths := []collectives.DataPath{collectives.DataPathDevice, collectives.DataPathStaged}
	outs := make([]*array.Array, 2)
	for r := range 2 {
		var tr transport.Transport = ts[r]
		if len(opts) > 0 { // as across processes: no PeerAccess, the host path matches by messages
			tr = struct{ transport.Transport }{tr}
		}
		g, err := collectives.New(rt, tr, 77, append([]collectives.Option{collectives.WithDataPath(paths[r]), collectives.WithTimeout(20 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		s := testenv.Stream(t, rt, dev)
		if outs[r], err = g.AllReduce(s, fromFloat64(t, s, gpu.Float32, []float64{1, 2}, 2), collectives.Sum); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 2 {
		if err := outs[r].Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrMismatch) || errors.Is(err, collectives.ErrTimeout) {
			t.Fatalf("rank %d (%v): %v, want ErrMismatch", r, paths[r], err)
		}
	}
}

// TestDevicePathSendRecv: on the device path, a ring (with 2 ranks both
// ways between one pair) moves every dtype exactly, twice per pair in
// order: even ranks send first, odd ones receive first, since a Send there
// completes when its receiver has copied (a rendezvous, as a large message
// on the host path); and the same ring as one Batch per rank; a receive of
// another shape fails with ErrShapeMismatch on the receiver and aborts the
// sender; a sender on the host path meets a receiver on the device path
// with ErrMismatch.
func TestDevicePathSendRecv(t *testing.T) {
	for _, n := range []int{2, 3} {
		w := newWorld(t, n, collectives.WithDataPath(collectives.DataPathDevice), collectives.WithTimeout(30*time.Second))
		for _, dt := range gpu.DTypes {
			for _, count := range []int{0, 1, 7, 1024} {
				outs := make([][]*array.Array, n)
				for r := range n {
					right, left := (r+1)%n, (r+n-1)%n
					sends := func() {
						for k := range 2 {
							x := fromFloat64(t, w.s[r], dt, rounded(dt, input(dt, r*10+k, count)), count)
							if err := w.groups[r].Send(w.s[r], x, right); err != nil {
								t.Fatal(err)
							}
						}
					}
					if r%2 == 0 {
						sends()
					}
					for range 2 {
						y, err := w.groups[r].Recv(w.s[r], []int{count}, dt, left)
						if err != nil {
							t.Fatal(err)
						}
						outs[r] = append(outs[r], y)
					}
					if r%2 == 1 {
						sends()
					}
				}
				for r := range n {
					left := (r + n - 1) % n
					for k, y := range outs[r] {
						if err := compare(dt, values(t, dt, y), rounded(dt, input(dt, left*10+k, count))); err != nil {
							t.Fatalf("n=%d %s count=%d rank %d message %d: %v", n, dt, count, r, k, err)
						}
					}
					if err := w.groups[r].Wait(testenv.Ctx(t, 30*time.Second)); err != nil {
						t.Fatalf("rank %d: %v", r, err)
					}
				}
			}
		}
	}
	// The ring as one Batch per rank, receives listed first.
	w := newWorld(t, 3, collectives.WithDataPath(collectives.DataPathDevice), collectives.WithTimeout(20*time.Second))
	bouts := make([][]*array.Array, 3)
	for r := range 3 {
		x := fromFloat64(t, w.s[r], gpu.Int64, []float64{float64(r), 7}, 2)
		var err error
		if bouts[r], err = w.groups[r].Batch(w.s[r], collectives.RecvOp([]int{2}, gpu.Int64, (r+2)%3), collectives.SendOp(x, (r+1)%3)); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 3 {
		if got := values(t, gpu.Int64, bouts[r][0]); got[0] != float64((r+2)%3) || got[1] != 7 {
			t.Fatalf("batch ring rank %d: %v", r, got)
		}
	}
	w = newWorld(t, 2, collectives.WithDataPath(collectives.DataPathDevice), collectives.WithTimeout(20*time.Second))
	if err := w.groups[0].Send(w.s[0], fromFloat64(t, w.s[0], gpu.Float32, []float64{1, 2, 3}, 3), 1); err != nil {
		t.Fatal(err)
	}
	y, err := w.groups[1].Recv(w.s[1], []int{4}, gpu.Float32, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := y.Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrShapeMismatch) {
		t.Fatalf("receive of 4 from a send of 3: %v, want ErrShapeMismatch", err)
	}
	if err := w.groups[0].Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrAborted) {
		t.Fatalf("its sender: %v, want the receiver's abort", err)
	}
	// Host-path sender, device-path receiver.
	rt := testenv.Runtime(t)
	dev := testenv.Device(t)
	ts := transport.NewLocal(2)
	paths := []collectives.DataPath{collectives.DataPathStaged, collectives.DataPathDevice}
	gs := make([]*collectives.Group, 2)
	ss := make([]*streams.GPU, 2)
	for r := range 2 {
		g, err := collectives.New(rt, ts[r], 78, collectives.WithDataPath(paths[r]), collectives.WithTimeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		gs[r], ss[r] = g, testenv.Stream(t, rt, dev)
	}
	if err := gs[0].Send(ss[0], fromFloat64(t, ss[0], gpu.Float32, []float64{1, 2}, 2), 1); err != nil {
		t.Fatal(err)
	}
	y, err = gs[1].Recv(ss[1], []int{2}, gpu.Float32, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := y.Wait(testenv.Ctx(t, 30*time.Second)); !errors.Is(err, collectives.ErrMismatch) || errors.Is(err, collectives.ErrTimeout) {
		t.Fatalf("device receiver of a host sender: %v, want ErrMismatch", err)
	}
}

// importOwnExport exports a buffer of d (whose IPC side is dev) and imports it in this process,
// as the in-process stand-in for separate processes does: the sim allows
// it, CUDA refuses it (an IPC handle opens only in another process).
func importOwnExport(d gpu.Device, dev gpu.IPCDevice) error {
	b, err := d.Alloc(256, gpu.DeviceMem)
	if err != nil {
		return err
	}
	defer b.Free()
	h, err := dev.Export(b)
	if err != nil {
		return err
	}
	alias, err := dev.Import(h)
	if err != nil {
		return err
	}
	return alias.Free()
}
