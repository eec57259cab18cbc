package collectives_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// The engine path's choreography, on in-process ranks with a test engine
// on the sim (NCCL, the engine the path is for, needs a GPU per rank; its
// own tests run on the H200): the engine's collectives compute on the
// sim's host-visible device memory once every rank's Sync has arrived, as
// a vendor library's kernels would once every rank has launched them.

// testEngines is a world of test engines: one per rank of each id.
type testEngines struct {
	mu     sync.Mutex
	worlds map[string]*engineWorld
	made   atomic.Int32 // engines made
	ran    atomic.Int32 // collectives run (counted once per world)
	noID   bool         // NewEngineID fails as without the library
	fail   func(rank int) error
}

type engineWorld struct {
	n      int
	mu     sync.Mutex
	joined int
	all    chan struct{}
	rounds map[int]*engineRound
}

type engineRound struct {
	ops     []engineOp
	arrived int
	done    chan struct{}
}

type engineOp struct {
	kind    string
	in, out gpu.Buffer
	count   int
	dt      gpu.DType
	op      gpu.ReduceOp
	root    int
}

// engineDevice is a sim device with the test engines.
type engineDevice struct {
	gpu.Device
	e *testEngines
}

func (d engineDevice) EngineSupports(dt gpu.DType) bool { return dt != gpu.Int16 }

func (d engineDevice) NewEngineID() ([]byte, error) {
	if d.e.noID {
		return nil, fmt.Errorf("test engine: no library: %w", gpu.ErrNoBackend)
	}
	id := make([]byte, 128)
	_, _ = rand.Read(id)
	return id, nil
}

func (d engineDevice) NewEngine(ctx context.Context, id []byte, n, rank int) (gpu.Engine, error) {
	e := d.e
	e.mu.Lock()
	w := e.worlds[string(id)]
	if w == nil {
		w = &engineWorld{n: n, all: make(chan struct{}), rounds: map[int]*engineRound{}}
		e.worlds[string(id)] = w
	}
	e.mu.Unlock()
	w.mu.Lock()
	if w.joined++; w.joined == n {
		close(w.all)
	}
	w.mu.Unlock()
	select {
	case <-w.all:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	e.made.Add(1)
	return &engineRank{e: e, w: w, rank: rank}, nil
}

// engineRank is one rank's test engine.
type engineRank struct {
	e       *testEngines
	w       *engineWorld
	rank    int
	mu      sync.Mutex
	pending []engineOp
	next    int
	closed  bool
}

func (r *engineRank) add(op engineOp) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("test engine: %w", gpu.ErrClosed)
	}
	r.pending = append(r.pending, op)
	return nil
}

func (r *engineRank) AllReduce(in, out gpu.Buffer, count int, dt gpu.DType, op gpu.ReduceOp) error {
	return r.add(engineOp{kind: "allreduce", in: in, out: out, count: count, dt: dt, op: op})
}
func (r *engineRank) AllGather(in, out gpu.Buffer, count int, dt gpu.DType) error {
	return r.add(engineOp{kind: "allgather", in: in, out: out, count: count, dt: dt})
}
func (r *engineRank) ReduceScatter(in, out gpu.Buffer, count int, dt gpu.DType, op gpu.ReduceOp) error {
	return r.add(engineOp{kind: "reducescatter", in: in, out: out, count: count, dt: dt, op: op})
}
func (r *engineRank) Broadcast(in, out gpu.Buffer, count int, dt gpu.DType, root int) error {
	return r.add(engineOp{kind: "broadcast", in: in, out: out, count: count, dt: dt, root: root})
}

// Sync runs the pending collectives: each waits for every rank's.
func (r *engineRank) Sync(ctx context.Context) error {
	r.mu.Lock()
	ops := r.pending
	r.pending = nil
	r.mu.Unlock()
	if r.e.fail != nil {
		if err := r.e.fail(r.rank); err != nil {
			return err
		}
	}
	for _, op := range ops {
		w := r.w
		w.mu.Lock()
		k := r.next
		r.next++
		rd := w.rounds[k]
		if rd == nil {
			rd = &engineRound{ops: make([]engineOp, w.n), done: make(chan struct{})}
			w.rounds[k] = rd
		}
		rd.ops[r.rank] = op
		if rd.arrived++; rd.arrived == w.n {
			run(rd.ops)
			r.e.ran.Add(1)
			close(rd.done)
		}
		w.mu.Unlock()
		select {
		case <-rd.done:
		case <-ctx.Done():
			return fmt.Errorf("test engine: %w", ctx.Err())
		}
	}
	return nil
}

// run computes a round's collective on the ranks' buffers.
func run(ops []engineOp) {
	n, o := len(ops), ops[0]
	size := o.count * o.dt.Size() // the input's bytes
	if o.kind == "reducescatter" {
		size *= n // count is the output's (each rank's block)
	}
	sum := func() []byte {
		acc := slices.Clone(ops[0].in.Bytes()[:size])
		for _, q := range ops[1:] {
			if err := reduce.Into(reduce.Op(q.op), q.dt, acc, q.in.Bytes()[:size]); err != nil {
				panic(err)
			}
		}
		return acc
	}
	switch o.kind {
	case "allreduce":
		acc := sum()
		for _, q := range ops {
			copy(q.out.Bytes(), acc)
		}
	case "reducescatter":
		acc, blk := sum(), size/n
		for r, q := range ops {
			copy(q.out.Bytes(), acc[r*blk:(r+1)*blk])
		}
	case "allgather":
		ins := make([][]byte, n)
		for r, q := range ops {
			ins[r] = slices.Clone(q.in.Bytes()[:size])
		}
		for _, q := range ops {
			copy(q.out.Bytes(), slices.Concat(ins...))
		}
	case "broadcast":
		src := slices.Clone(ops[o.root].in.Bytes()[:size])
		for _, q := range ops {
			copy(q.out.Bytes(), src)
		}
	}
}

func (r *engineRank) Abort() error { return r.Close() }

func (r *engineRank) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

// newEngineWorld is a world of n ranks on the engine path.
func newEngineWorld(t *testing.T, n int, e *testEngines, timeout time.Duration) *world {
	t.Helper()
	dev := testenv.Device(t)
	if !dev.Properties().HostVisibleDeviceMem {
		t.Skip("the test engine computes on host-visible device memory (the sim's)")
	}
	e.worlds = map[string]*engineWorld{}
	return newWorldOn(t, engineDevice{Device: dev, e: e}, n, collectives.WithDataPath(collectives.DataPathNCCL),
		collectives.WithProcesses(), collectives.WithTimeout(timeout))
}

// TestEnginePathMatrix: all-reduce (in place and not), all-gather,
// reduce-scatter and broadcast on the engine path, 2 and 3 ranks, four
// dtypes: results as on the host path; the engine is made once per rank
// and runs every one of them; 16-bit integers and uneven reduce-scatter
// blocks take the host path.
func TestEnginePathMatrix(t *testing.T) {
	for _, n := range []int{2, 3} {
		e := &testEngines{}
		w := newEngineWorld(t, n, e, 20*time.Second)
		want := 0
		for _, dt := range []gpu.DType{gpu.Float32, gpu.Float64, gpu.Int32, gpu.BFloat16, gpu.Int16} {
			for _, count := range []int{0, 1, 7, 1024} {
				t.Run(fmt.Sprintf("n%d/%s/%d", n, dt, count), func(t *testing.T) {
					engineCase(t, w, n, dt, count)
				})
				if dt != gpu.Int16 {
					want += 4 // all-reduce twice, all-gather, broadcast
					if count%n == 0 {
						want++ // reduce-scatter of equal blocks
					}
				}
			}
		}
		if got := e.made.Load(); got != int32(n) {
			t.Errorf("n%d: %d engines made, want %d (one per rank)", n, got, n)
		}
		if got := e.ran.Load(); got != int32(want) {
			t.Errorf("n%d: the engine ran %d collectives, want %d", n, got, want)
		}
	}
}

func engineCase(t *testing.T, w *world, n int, dt gpu.DType, count int) {
	op := []collectives.Op{collectives.Sum, collectives.Max}[count%2]
	root := count % n
	ins := make([][]float64, n)
	ar, arIn, ag, rs, bc := make([]*array.Array, n), make([]*array.Array, n), make([]*array.Array, n), make([]*array.Array, n), make([]*array.Array, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		ins[r] = rounded(dt, input(dt, r, count))
		wg.Add(1)
		go func() { // the first engine call waits for every rank's launch
			defer wg.Done()
			g, s := w.groups[r], w.s[r]
			x := fromFloat64(t, s, dt, ins[r], count)
			var err error
			if ar[r], err = g.AllReduce(s, x, op); err != nil {
				errs[r] = err
				return
			}
			if arIn[r], err = g.AllReduce(s, fromFloat64(t, s, dt, ins[r], count), op, collectives.Donate()); err != nil {
				errs[r] = err
				return
			}
			if ag[r], err = g.AllGather(s, x); err != nil {
				errs[r] = err
				return
			}
			if rs[r], err = g.ReduceScatter(s, x, op); err != nil {
				errs[r] = err
				return
			}
			bc[r], errs[r] = g.Broadcast(s, x, root)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := range n {
		checkFive(t, dt, op, root, count, r, ins, ar[r], arIn[r], ag[r], rs[r], bc[r])
		if err := w.groups[r].Wait(testenv.Ctx(t, 20*time.Second)); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// allReduceEverywhere launches a float32 all-reduce of count elements on
// every rank at once and returns each rank's output and launch error.
func allReduceEverywhere(t *testing.T, w *world, dt gpu.DType, count int) ([]*array.Array, []error) {
	n := len(w.groups)
	outs, errs := make([]*array.Array, n), make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := fromFloat64(t, w.s[r], dt, input(dt, r, count), count)
			outs[r], errs[r] = w.groups[r].AllReduce(w.s[r], x, collectives.Sum)
		}()
	}
	wg.Wait()
	return outs, errs
}

// Without the engine's library (rank 0 cannot make an id), every rank's
// engine collectives fail with ErrNoBackend, the first at its launch and
// the later ones at once; the host path's ops still work.
func TestEnginePathNoLibrary(t *testing.T) {
	e := &testEngines{noID: true}
	w := newEngineWorld(t, 3, e, 5*time.Second)
	for round := range 2 {
		_, errs := allReduceEverywhere(t, w, gpu.Float32, 8)
		for r, err := range errs {
			if !errors.Is(err, gpu.ErrNoBackend) {
				t.Fatalf("round %d rank %d: %v, want ErrNoBackend", round, r, err)
			}
		}
	}
	outs, errs := allReduceEverywhere(t, w, gpu.Int16, 8) // no engine type: the host path
	for r := range 3 {
		if errs[r] != nil {
			t.Fatalf("int16 rank %d: %v", r, errs[r])
		}
		if err := compare(gpu.Int16, values(t, gpu.Int16, outs[r]), reduceRef(gpu.Int16, collectives.Sum, [][]float64{input(gpu.Int16, 0, 8), input(gpu.Int16, 1, 8), input(gpu.Int16, 2, 8)})); err != nil {
			t.Fatalf("int16 rank %d: %v", r, err)
		}
	}
	if e.made.Load() != 0 {
		t.Fatalf("%d engines made without an id", e.made.Load())
	}
}

// An engine that fails on one rank fails the collective on every rank (the
// peers by their timeout: an engine's kernels do not hear aborts), releases
// every GPU wait (the outputs fail, the streams go on) and leaves the
// group's engine aborted: later engine collectives fail at once.
func TestEnginePathFailure(t *testing.T) {
	e := &testEngines{}
	var failed atomic.Bool
	e.fail = func(rank int) error {
		if rank == 1 && failed.CompareAndSwap(false, true) {
			return fmt.Errorf("test engine: rank 1 lost its peer: %w", collectives.ErrPeerLost)
		}
		return nil
	}
	w := newEngineWorld(t, 2, e, 2*time.Second)
	outs, errs := allReduceEverywhere(t, w, gpu.Float32, 16)
	for r := range 2 {
		if errs[r] != nil {
			t.Fatalf("rank %d launch: %v", r, errs[r])
		}
		if _, err := array.ToFloat64(testenv.Ctx(t, 20*time.Second), outs[r]); err == nil {
			t.Fatalf("rank %d: the all-reduce succeeded", r)
		}
		_ = w.groups[r].Wait(testenv.Ctx(t, 20*time.Second))
	}
	_, errs = allReduceEverywhere(t, w, gpu.Float32, 16)
	for r := range 2 {
		if errs[r] == nil || !errors.Is(errs[r], collectives.ErrPeerLost) && !errors.Is(errs[r], collectives.ErrTimeout) {
			t.Fatalf("rank %d after the failure: %v, want the engine's earlier failure", r, errs[r])
		}
	}
	outs, errs = allReduceEverywhere(t, w, gpu.Int16, 4) // the streams go on
	for r := range 2 {
		if errs[r] != nil {
			t.Fatalf("int16 rank %d: %v", r, errs[r])
		}
		if _, err := array.ToFloat64(testenv.Ctx(t, 20*time.Second), outs[r]); err != nil {
			t.Fatalf("int16 rank %d after the failure: %v", r, err)
		}
	}
}

// A peer lost while the engine works (its group closed: as its process
// ending looks to the transport) fails the collective on the survivor with
// ErrPeerLost, not at its deadline: the comm task watches the transport
// while the engine's kernels cannot hear it.
func TestEnginePathPeerLost(t *testing.T) {
	e := &testEngines{}
	w := newEngineWorld(t, 2, e, 30*time.Second)
	if _, errs := allReduceEverywhere(t, w, gpu.Float32, 4); errs[0] != nil || errs[1] != nil {
		t.Fatalf("first all-reduce: %v", errs)
	}
	x := fromFloat64(t, w.s[0], gpu.Float32, input(gpu.Float32, 0, 4), 4)
	y, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum) // rank 1 never joins it
	if err != nil {
		t.Fatal(err)
	}
	if err := w.groups[1].Close(); err != nil {
		t.Fatal(err)
	}
	_, err = array.ToFloat64(testenv.Ctx(t, 60*time.Second), y)
	if !errors.Is(err, collectives.ErrPeerLost) {
		t.Fatalf("survivor: %v, want ErrPeerLost", err)
	}
}
