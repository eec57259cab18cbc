//go:build linux

package cuda

import (
	"errors"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// fakeDriver is a driver table of Go functions that records the stream
// operations a queue issues, fails cuMemcpyAsync into failDst with
// copyErr, and answers cuStreamQuery with query. No GPU is involved: the
// tests drive issueBatch and finish directly.
type fakeDriver struct {
	copies  []uintptr // destination of every cuMemcpyAsync issued
	writes  []uintptr // address of every cuStreamWriteValue32 issued
	failDst uintptr
	copyErr cuResult
	query   cuResult
}

func (f *fakeDriver) api() *api {
	noName := func(cuResult, **byte) cuResult { return 1 }
	return &api{
		cuGetErrorName:   noName,
		cuGetErrorString: noName,
		cuMemcpyAsync: func(dst, src uintptr, n uint64, s cuStream) cuResult {
			if dst == f.failDst {
				return f.copyErr
			}
			f.copies = append(f.copies, dst)
			return cudaSuccess
		},
		cuStreamWriteValue32: func(s cuStream, addr uintptr, v uint32, flags uint32) cuResult {
			f.writes = append(f.writes, addr)
			return cudaSuccess
		},
		cuStreamQuery: func(cuStream) cuResult { return f.query },
	}
}

// fakeQueue returns a queue on f with its completion word at 0x100, and
// live buffers at 0x1000, 0x2000, ... (n of them).
func fakeQueue(f *fakeDriver, n int) (*queue, []*buffer) {
	d := &Device{api: f.api(), opts: Options{}.withDefaults()}
	var comp uint32
	q := &queue{
		dev:        d,
		comp:       &word{dev: d, s: slot{p: &comp, dptr: 0x100}},
		maxBatches: 64,
		maxCmds:    512,
		issuerWake: make(chan struct{}, 1),
		pollerWake: make(chan struct{}, 1),
	}
	bufs := make([]*buffer, n)
	for i := range bufs {
		bufs[i] = &buffer{dev: d, n: 64, kind: gpu.DeviceMem, dptr: uintptr(0x1000 * (i + 1)), l: lease{release: func() {}}}
	}
	return q, bufs
}

func cp(dst, src *buffer) gpu.Command { return gpu.Copy{Dst: dst, Src: src, Bytes: 64} }

// issueAndFinish issues b on q and completes it, returning done's error.
func issueAndFinish(q *queue, b *batch) error {
	var got error
	b.done = func(err error) { got = err }
	q.issueBatch(b)
	b.finish()
	return got
}

// TestUnitsSkipOnlyTheirRest: a command that fails to issue (a freed
// buffer, or a driver error of that call while the stream is healthy)
// skips the rest of its unit only; the later units are issued and the
// batch's completion mark follows; done gets a *gpu.BatchError naming
// exactly the failed units.
func TestUnitsSkipOnlyTheirRest(t *testing.T) {
	f := &fakeDriver{failDst: 0x5000, copyErr: 1, query: cudaNotReady}
	q, bufs := fakeQueue(f, 5)
	src, a, gone, c, bad := bufs[0], bufs[1], bufs[2], bufs[3], bufs[4]
	gone.l.free()
	b := &batch{
		cmds: []gpu.Command{
			cp(a, src),                // unit 0
			cp(gone, src), cp(a, src), // unit 1: fails at 1, skips 2
			cp(c, src),               // unit 2
			cp(bad, src), cp(c, src), // unit 3: driver error at 4, skips 5
			cp(a, src), // unit 4
		},
		ends: []int{1, 3, 4, 6, 7},
	}
	err := issueAndFinish(q, b)
	var be *gpu.BatchError
	if !errors.As(err, &be) || len(be.Units) != 2 || be.Units[0].Unit != 1 || be.Units[0].Command != 1 ||
		be.Units[1].Unit != 3 || be.Units[1].Command != 4 {
		t.Fatalf("done got %v, want a BatchError of units 1 (command 1) and 3 (command 4)", err)
	}
	if !errors.Is(gpu.UnitErr(err, 1), gpu.ErrClosed) {
		t.Errorf("unit 1: %v, want ErrClosed (freed buffer)", gpu.UnitErr(err, 1))
	}
	var de *Error
	if !errors.As(gpu.UnitErr(err, 3), &de) || de.Call != "cuMemcpyAsync" {
		t.Errorf("unit 3: %v, want the driver's cuMemcpyAsync error", gpu.UnitErr(err, 3))
	}
	want := []uintptr{a.dptr, c.dptr, a.dptr} // commands 0, 3, 6
	if len(f.copies) != len(want) || f.copies[0] != want[0] || f.copies[1] != want[1] || f.copies[2] != want[2] {
		t.Errorf("issued copies to %#x, want %#x", f.copies, want)
	}
	if len(f.writes) != 1 || f.writes[0] != q.comp.s.dptr {
		t.Errorf("stream writes %#x, want the one completion mark", f.writes)
	}
}

// TestUnitsBrokenStreamFailsWholeBatch: a driver error while the stream
// has failed (a sticky context error) ends the whole batch: no later unit
// is issued and done gets a plain error.
func TestUnitsBrokenStreamFailsWholeBatch(t *testing.T) {
	f := &fakeDriver{failDst: 0x3000, copyErr: 700, query: 700} // CUDA_ERROR_ILLEGAL_ADDRESS
	q, bufs := fakeQueue(f, 4)
	src, a, bad, c := bufs[0], bufs[1], bufs[2], bufs[3]
	err := issueAndFinish(q, &batch{cmds: []gpu.Command{cp(a, src), cp(bad, src), cp(c, src)}, ends: []int{1, 2, 3}})
	var be *gpu.BatchError
	var de *Error
	if err == nil || errors.As(err, &be) || !errors.As(err, &de) {
		t.Fatalf("done got %v (%T), want the driver's error, plain", err, err)
	}
	if len(f.copies) != 1 || f.copies[0] != a.dptr {
		t.Errorf("issued copies to %#x, want only unit 0's", f.copies)
	}
}

// TestOneUnitStopsAtFirstFailure: without ends the batch is one unit: the
// first failing command ends it and done gets its error plain.
func TestOneUnitStopsAtFirstFailure(t *testing.T) {
	f := &fakeDriver{query: cudaNotReady}
	q, bufs := fakeQueue(f, 3)
	src, gone, c := bufs[0], bufs[1], bufs[2]
	gone.l.free()
	err := issueAndFinish(q, &batch{cmds: []gpu.Command{cp(c, src), cp(gone, src), cp(c, src)}})
	var be *gpu.BatchError
	if !errors.Is(err, gpu.ErrClosed) || errors.As(err, &be) {
		t.Fatalf("done got %v (%T), want a plain error wrapping ErrClosed", err, err)
	}
	if len(f.copies) != 1 {
		t.Errorf("issued %d copies, want 1 (the one before the failure)", len(f.copies))
	}
}

// TestFinishRecoversDone: a done callback that panics is swallowed; the
// batch's leases are dropped first.
func TestFinishRecoversDone(t *testing.T) {
	released := 0
	r := &buffer{l: lease{release: func() { released++ }}}
	r.l.acquire()
	r.l.free()
	b := &batch{held: []resource{r}, done: func(error) { panic("done panics") }}
	b.finish()
	if released != 1 {
		t.Errorf("lease released %d times, want 1", released)
	}
}

// TestSubmitUnitsRejectsBadEnds: SubmitUnits refuses ends that do not
// split the batch, before it takes any lease.
func TestSubmitUnitsRejectsBadEnds(t *testing.T) {
	f := &fakeDriver{}
	q, bufs := fakeQueue(f, 2)
	err := q.SubmitUnits([]gpu.Command{cp(bufs[0], bufs[1])}, []int{2}, nil)
	if !errors.Is(err, gpu.ErrBadArgument) {
		t.Errorf("ends past the batch: %v, want ErrBadArgument", err)
	}
}
