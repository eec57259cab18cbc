package nccl

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// The values nccl.h gives (NCCL 2.28.3 src/nccl.h.in).
func TestDataTypeMatchesHeader(t *testing.T) {
	want := []struct {
		dt   DataType
		c    int32
		size int
		name string
	}{
		{Int8, 0, 1, "ncclInt8"}, {Uint8, 1, 1, "ncclUint8"}, {Int32, 2, 4, "ncclInt32"},
		{Uint32, 3, 4, "ncclUint32"}, {Int64, 4, 8, "ncclInt64"}, {Uint64, 5, 8, "ncclUint64"},
		{Float16, 6, 2, "ncclFloat16"}, {Float32, 7, 4, "ncclFloat32"}, {Float64, 8, 8, "ncclFloat64"},
		{BFloat16, 9, 2, "ncclBfloat16"}, {Float8E4M3, 10, 1, "ncclFloat8e4m3"}, {Float8E5M2, 11, 1, "ncclFloat8e5m2"},
	}
	for _, w := range want {
		if int32(w.dt) != w.c || w.dt.Size() != w.size || w.dt.String() != w.name || !w.dt.Valid() {
			t.Errorf("%v: value %d size %d valid %v, want %d %d (%s)", w.dt, int32(w.dt), w.dt.Size(), w.dt.Valid(), w.c, w.size, w.name)
		}
	}
	for _, bad := range []DataType{-1, 12, 100} {
		if bad.Valid() || bad.Size() != 0 || !strings.Contains(bad.String(), "ncclDataType_t(") {
			t.Errorf("DataType(%d): valid %v size %d %q", int32(bad), bad.Valid(), bad.Size(), bad.String())
		}
	}
}

func TestRedOpMatchesHeader(t *testing.T) {
	want := map[RedOp]int32{Sum: 0, Prod: 1, Max: 2, Min: 3, Avg: 4}
	names := map[RedOp]string{Sum: "ncclSum", Prod: "ncclProd", Max: "ncclMax", Min: "ncclMin", Avg: "ncclAvg"}
	for op, c := range want {
		if int32(op) != c || !op.Valid() || op.String() != names[op] {
			t.Errorf("%v = %d valid %v, want %d", op, int32(op), op.Valid(), c)
		}
	}
	for _, bad := range []RedOp{-1, 5, 0x7fffffff} {
		if bad.Valid() {
			t.Errorf("RedOp(%d) valid", int32(bad))
		}
	}
}

func TestResultErrors(t *testing.T) {
	f := &fakeLib{}
	l := f.lib()
	if err := l.check("op", "ncclX", Success); err != nil {
		t.Fatalf("Success: %v", err)
	}
	cases := []struct {
		r    Result
		want []error
	}{
		{UnhandledCUDAError, []error{ErrCUDA}},
		{SystemError, []error{ErrSystem}},
		{InternalError, []error{ErrInternal}},
		{InvalidArgument, []error{ErrInvalidArgument, errs.ErrBadArgument}},
		{InvalidUsage, []error{ErrInvalidUsage}},
		{RemoteError, []error{ErrRemote, errs.ErrPeerLost}},
		{InProgress, []error{ErrInProgress}},
	}
	all := []error{ErrCUDA, ErrSystem, ErrInternal, ErrInvalidArgument, ErrInvalidUsage, ErrRemote, ErrInProgress, ErrUnavailable, ErrClosed}
	f.setNext(Success, "peer 3 went away")
	for _, c := range cases {
		err := l.check("allreduce", "ncclAllReduce", c.r)
		var e *Error
		if !errors.As(err, &e) || e.Result != c.r {
			t.Fatalf("%v: %v is not an *Error of that result", c.r, err)
		}
		for _, w := range c.want {
			if !errors.Is(err, w) {
				t.Errorf("%v: %v does not wrap %v", c.r, err, w)
			}
		}
		for _, o := range all {
			if !errors.Is(err, o) && containsErr(c.want, o) {
				t.Errorf("%v: missing %v", c.r, o)
			}
			if errors.Is(err, o) && !containsErr(c.want, o) {
				t.Errorf("%v: %v wraps %v too", c.r, err, o)
			}
		}
		msg := err.Error()
		for _, part := range []string{"nccl: allreduce: ncclAllReduce: ", c.r.String(), "fake description", "peer 3 went away"} {
			if !strings.Contains(msg, part) {
				t.Errorf("%q lacks %q", msg, part)
			}
		}
	}
	if got := Result(42).String(); got != "ncclResult_t(42)" {
		t.Errorf("unknown result prints %q", got)
	}
	if err := l.check("x", "ncclX", Result(42)); errors.Is(err, ErrInternal) || err == nil {
		t.Errorf("unknown result: %v", err)
	}
}

func containsErr(list []error, e error) bool {
	for _, x := range list {
		if x == e {
			return true
		}
	}
	return false
}

func TestLibPathsOrder(t *testing.T) {
	t.Setenv(LibEnv, "")
	if got := libPaths(); strings.Join(got, ",") != "libnccl.so.2,libnccl.so" {
		t.Errorf("without %s: %v", LibEnv, got)
	}
	t.Setenv(LibEnv, "/opt/nccl/lib/libnccl.so.2")
	if got := libPaths(); strings.Join(got, ",") != "/opt/nccl/lib/libnccl.so.2,libnccl.so.2,libnccl.so" {
		t.Errorf("with %s: %v", LibEnv, got)
	}
}

func TestOpenLibraryMissing(t *testing.T) {
	paths := []string{"/nonexistent/choreo/libnccl.so.2", "/nonexistent/choreo/libnccl.so"}
	l, err := openLibrary(paths)
	if l != nil || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("openLibrary(%v) = %v, %v; want ErrUnavailable", paths, l, err)
	}
	for _, p := range paths {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %s", err, p)
		}
	}
	if !strings.HasPrefix(err.Error(), "nccl: ") {
		t.Errorf("error %q lacks its origin", err)
	}
	if _, err := openLibrary(nil); !errors.Is(err, ErrUnavailable) {
		t.Errorf("no paths: %v", err)
	}
}

// A library that opens but is not NCCL (libc) is refused with the missing
// entry point named, not used.
func TestOpenLibraryNotNCCL(t *testing.T) {
	for _, p := range []string{"libc.so.6", "libm.so.6"} {
		_, err := openLibrary([]string{p})
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("openLibrary(%s) = %v; want ErrUnavailable", p, err)
		}
		if strings.Contains(err.Error(), "lacks ncclGetVersion") {
			return
		}
		t.Logf("%s: %v", p, err)
	}
	t.Skip("no libc to open on this system")
}

func TestUniqueIDText(t *testing.T) {
	id := testID()
	b, err := id.MarshalText()
	if err != nil || len(b) != 256 {
		t.Fatalf("MarshalText: %d bytes, %v", len(b), err)
	}
	var back UniqueID
	if err := back.UnmarshalText(b); err != nil || back != id {
		t.Fatalf("round trip: %v, equal %v", err, back == id)
	}
	for _, bad := range []string{"", "00", strings.Repeat("zz", 128)} {
		if err := back.UnmarshalText([]byte(bad)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("UnmarshalText(%q): %v", bad, err)
		}
	}
	if back != id {
		t.Error("failed UnmarshalText changed the id")
	}
	var nilID *UniqueID
	if err := nilID.UnmarshalText(b); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil receiver: %v", err)
	}
	if !(UniqueID{}).IsZero() || id.IsZero() {
		t.Error("IsZero wrong")
	}
}

// InitRank checks its arguments before it looks for the library, so these
// hold with or without NCCL.
func TestInitRankArguments(t *testing.T) {
	id := testID()
	for _, c := range []struct {
		id           UniqueID
		nranks, rank int
		what         string
	}{
		{id, 0, 0, "ranks"}, {id, -1, 0, "ranks"}, {id, math.MaxInt32 + 1, 0, "ranks"},
		{id, 2, 2, "out of range"}, {id, 2, -1, "out of range"}, {UniqueID{}, 1, 0, "zero unique id"},
	} {
		comm, err := InitRank(c.id, c.nranks, c.rank)
		if comm != nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.what) {
			t.Errorf("InitRank(nranks %d, rank %d): %v, %v; want ErrInvalidArgument about %q", c.nranks, c.rank, comm, err, c.what)
		}
	}
}

func TestNilAndZeroComm(t *testing.T) {
	for _, c := range []*Comm{nil, {}} {
		calls := map[string]error{
			"AllReduce":     c.AllReduce(1, 1, 1, Float32, Sum, 0),
			"AllGather":     c.AllGather(1, 1, 1, Float32, 0),
			"ReduceScatter": c.ReduceScatter(1, 1, 1, Float32, Sum, 0),
			"Broadcast":     c.Broadcast(1, 1, 1, Float32, 0, 0),
			"Reduce":        c.Reduce(1, 1, 1, Float32, Sum, 0, 0),
			"Send":          c.Send(1, 1, Float32, 0, 0),
			"Recv":          c.Recv(1, 1, Float32, 0, 0),
			"AsyncError":    c.AsyncError(),
			"Abort":         c.Abort(),
			"Destroy":       c.Destroy(),
		}
		for name, err := range calls {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s on %#v: %v; want ErrInvalidArgument", name, c, err)
			}
		}
		if c.Count() != 0 || c.Rank() != -1 {
			t.Errorf("Count %d Rank %d on an unusable comm", c.Count(), c.Rank())
		}
	}
}

// newFakeComm makes a communicator on a fake library.
func newFakeComm(t *testing.T, f *fakeLib, nranks, rank int, o options) *Comm {
	t.Helper()
	c, err := initComm(f.lib(), o, testID(), nranks, rank)
	if err != nil {
		t.Fatalf("initComm: %v", err)
	}
	return c
}

func TestInitPrefersScalable(t *testing.T) {
	f := &fakeLib{}
	c := newFakeComm(t, f, 4, 3, options{})
	got := f.lastCall()
	if got.name != "ncclCommInitRankScalable" || got.nranks != 4 || got.rank != 3 || got.nID != 1 || !got.configIsNil || got.id != testID() {
		t.Errorf("init call %+v", got)
	}
	if c.Count() != 4 || c.Rank() != 3 || c.handle != f.handle {
		t.Errorf("comm: count %d rank %d handle %#x", c.Count(), c.Rank(), c.handle)
	}

	for _, o := range []struct {
		f *fakeLib
		o options
	}{{&fakeLib{noScale: true}, options{}}, {&fakeLib{}, options{forceByValue: true}}} {
		newFakeComm(t, o.f, 2, 1, o.o)
		got := o.f.lastCall()
		if got.name != "ncclCommInitRank" || got.nranks != 2 || got.rank != 1 || got.id != testID() {
			t.Errorf("by-value init call %+v", got)
		}
	}
}

func TestInitFailure(t *testing.T) {
	f := &fakeLib{}
	f.setNext(RemoteError, "bootstrap: connection refused")
	c, err := initComm(f.lib(), options{}, testID(), 2, 0)
	if c != nil || !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "nccl: init rank: ncclCommInitRankScalable") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("initComm = %v, %v", c, err)
	}
	if f.count("ncclCommAbort") != 0 {
		t.Error("aborted a communicator NCCL never returned")
	}
}

func TestCallsPassArguments(t *testing.T) {
	f := &fakeLib{}
	dev := &fakeDevice{}
	c := newFakeComm(t, f, 2, 1, options{dev: dev})
	const s, r, st = 0x1000, 0x2000, 0x77
	check := func(name string, err error, want fakeCall) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want.name, want.comm, want.stream = name, f.handle, st
		if got := f.lastCall(); got != want {
			t.Errorf("%s: NCCL got %+v, want %+v", name, got, want)
		}
	}
	check("ncclAllReduce", c.AllReduce(s, r, 10, Float32, Max, st), fakeCall{send: s, recv: r, count: 10, dt: Float32, op: Max})
	check("ncclAllGather", c.AllGather(s, r, 11, Int32, st), fakeCall{send: s, recv: r, count: 11, dt: Int32})
	check("ncclReduceScatter", c.ReduceScatter(s, r, 12, BFloat16, Avg, st), fakeCall{send: s, recv: r, count: 12, dt: BFloat16, op: Avg})
	check("ncclBroadcast", c.Broadcast(0, r, 13, Uint8, 0, st), fakeCall{recv: r, count: 13, dt: Uint8, root: 0})
	check("ncclReduce", c.Reduce(s, 0, 14, Int64, Prod, 0, st), fakeCall{send: s, count: 14, dt: Int64, op: Prod, root: 0})
	check("ncclSend", c.Send(s, 15, Float64, 0, st), fakeCall{send: s, count: 15, dt: Float64, root: 0})
	check("ncclRecv", c.Recv(r, 16, Float16, 1, st), fakeCall{recv: r, count: 16, dt: Float16, root: 1})
	// Zero elements need no buffers.
	check("ncclAllReduce", c.AllReduce(0, 0, 0, Float32, Sum, st), fakeCall{dt: Float32})
	if err := c.AsyncError(); err != nil {
		t.Errorf("AsyncError: %v", err)
	}
	if dev.calls != 9 { // init and eight calls; AsyncError needs no context
		t.Errorf("OnContext ran %d times, want 9", dev.calls)
	}
}

func TestCallsCheckArguments(t *testing.T) {
	f := &fakeLib{}
	c := newFakeComm(t, f, 2, 1, options{})
	before := len(f.calls)
	huge := math.MaxInt/4 + 1
	for name, err := range map[string]error{
		"negative count":           c.AllReduce(1, 1, -1, Float32, Sum, 0),
		"invalid type":             c.AllReduce(1, 1, 1, DataType(12), Sum, 0),
		"invalid op":               c.AllReduce(1, 1, 1, Float32, RedOp(5), 0),
		"null send":                c.AllReduce(0, 1, 1, Float32, Sum, 0),
		"null recv":                c.AllReduce(1, 0, 1, Float32, Sum, 0),
		"overflow":                 c.AllReduce(1, 1, huge, Float32, Sum, 0),
		"allgather overflow":       c.AllGather(1, 1, math.MaxInt/4/2+1, Float32, 0),
		"reducescatter overflow":   c.ReduceScatter(1, 1, math.MaxInt/8/2+1, Float64, Sum, 0),
		"reducescatter invalid op": c.ReduceScatter(1, 1, 1, Float32, RedOp(-1), 0),
		"allgather null recv":      c.AllGather(1, 0, 1, Float32, 0),
		"broadcast root":           c.Broadcast(1, 1, 1, Float32, 2, 0),
		"broadcast negative root":  c.Broadcast(1, 1, 1, Float32, -1, 0),
		"broadcast null recv":      c.Broadcast(1, 0, 1, Float32, 0, 0),
		"broadcast root null send": c.Broadcast(0, 1, 1, Float32, 1, 0),
		"reduce root":              c.Reduce(1, 1, 1, Float32, Sum, 5, 0),
		"reduce null send":         c.Reduce(0, 1, 1, Float32, Sum, 0, 0),
		"reduce root null recv":    c.Reduce(1, 0, 1, Float32, Sum, 1, 0),
		"send peer":                c.Send(1, 1, Float32, 2, 0),
		"send null":                c.Send(0, 1, Float32, 0, 0),
		"recv peer":                c.Recv(1, 1, Float32, -1, 0),
		"recv null":                c.Recv(0, 1, Float32, 0, 0),
		"recv negative":            c.Recv(1, -5, Float32, 0, 0),
	} {
		if !errors.Is(err, ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "nccl: ") {
			t.Errorf("%s: %v; want ErrInvalidArgument with its origin", name, err)
		}
	}
	if len(f.calls) != before {
		t.Errorf("NCCL was called %d times for bad arguments", len(f.calls)-before)
	}
}

func TestCallFailureIsError(t *testing.T) {
	f := &fakeLib{}
	c := newFakeComm(t, f, 1, 0, options{})
	f.setNext(InvalidUsage, "op on a revoked comm")
	err := c.AllReduce(1, 1, 1, Float32, Sum, 0)
	var e *Error
	if !errors.As(err, &e) || e.Op != "allreduce" || e.Call != "ncclAllReduce" || !errors.Is(err, ErrInvalidUsage) {
		t.Fatalf("AllReduce: %v", err)
	}
	if e.Last != "op on a revoked comm" {
		t.Errorf("last error %q", e.Last)
	}
}

func TestAbortThenCallsFail(t *testing.T) {
	f := &fakeLib{}
	c := newFakeComm(t, f, 1, 0, options{})
	if err := c.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if got := f.lastCall(); got.name != "ncclCommAbort" || got.comm != f.handle {
		t.Errorf("abort call %+v", got)
	}
	for name, err := range map[string]error{
		"AllReduce":  c.AllReduce(1, 1, 1, Float32, Sum, 0),
		"AllGather":  c.AllGather(1, 1, 1, Float32, 0),
		"Send":       c.Send(1, 1, Float32, 0, 0),
		"AsyncError": c.AsyncError(),
	} {
		if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "aborted or destroyed") {
			t.Errorf("%s after Abort: %v; want ErrClosed", name, err)
		}
	}
	if err := c.Abort(); err != nil {
		t.Errorf("second Abort: %v", err)
	}
	if err := c.Destroy(); err != nil {
		t.Errorf("Destroy after Abort: %v", err)
	}
	if n := f.count("ncclCommAbort") + f.count("ncclCommDestroy"); n != 1 {
		t.Errorf("NCCL ended the communicator %d times", n)
	}
	if c.Count() != 1 || c.Rank() != 0 {
		t.Errorf("Count %d Rank %d after Abort", c.Count(), c.Rank())
	}
}

func TestConcurrentEndsCallNCCLOnce(t *testing.T) {
	f := &fakeLib{}
	c := newFakeComm(t, f, 1, 0, options{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				err = c.Abort()
			} else {
				err = c.Destroy()
			}
			if err != nil {
				t.Errorf("end %d: %v", i, err)
			}
			if err := c.AllReduce(1, 1, 1, Float32, Sum, 0); !errors.Is(err, ErrClosed) {
				t.Errorf("AllReduce after end %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if n := f.count("ncclCommAbort") + f.count("ncclCommDestroy"); n != 1 {
		t.Errorf("NCCL ended the communicator %d times", n)
	}
}

// An end waits for the NCCL call in progress, which still sees the live
// handle, and a call that starts after the end began fails.
func TestEndWaitsForCallInProgress(t *testing.T) {
	f := &fakeLib{}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.onCall = func(name string) {
		if name == "ncclAllReduce" {
			once.Do(func() { close(entered); <-release })
		}
	}
	c := newFakeComm(t, f, 1, 0, options{})
	callDone := make(chan error, 1)
	go func() { callDone <- c.AllReduce(1, 1, 1, Float32, Sum, 0) }()
	<-entered
	endDone := make(chan error, 1)
	go func() { endDone <- c.Destroy() }()
	// The end has begun once new calls fail.
	deadline := time.Now().Add(10 * time.Second)
	for !errors.Is(c.Send(1, 1, Float32, 0, 0), ErrClosed) {
		if time.Now().After(deadline) {
			t.Fatal("calls still admitted 10 s after Destroy began")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-endDone:
		t.Fatalf("Destroy returned (%v) while a call was in progress", err)
	case <-time.After(20 * time.Millisecond):
	}
	if f.count("ncclCommDestroy") != 0 {
		t.Fatal("NCCL destroyed the communicator under a call in progress")
	}
	close(release)
	if err := <-callDone; err != nil {
		t.Errorf("call in progress: %v", err)
	}
	if err := <-endDone; err != nil {
		t.Errorf("Destroy: %v", err)
	}
	if f.count("ncclCommDestroy") != 1 {
		t.Error("Destroy did not reach NCCL")
	}
}

// A communicator whose device was closed is still freed, on a locked
// thread without the device.
func TestEndAfterDeviceClosed(t *testing.T) {
	f := &fakeLib{}
	dev := &fakeDevice{}
	c := newFakeComm(t, f, 1, 0, options{dev: dev})
	dev.mu.Lock()
	dev.closed = true
	dev.mu.Unlock()
	if err := c.AllReduce(1, 1, 1, Float32, Sum, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("AllReduce on a closed device: %v", err)
	}
	if err := c.Destroy(); err != nil {
		t.Errorf("Destroy: %v", err)
	}
	if f.count("ncclCommDestroy") != 1 {
		t.Error("communicator not destroyed")
	}
}

func TestEndFailureIsReported(t *testing.T) {
	f := &fakeLib{}
	c := newFakeComm(t, f, 1, 0, options{})
	f.setNext(SystemError, "")
	if err := c.Destroy(); !errors.Is(err, ErrSystem) || !strings.Contains(err.Error(), "nccl: destroy: ncclCommDestroy") {
		t.Errorf("Destroy: %v", err)
	}
	if err := c.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
}

func TestGroups(t *testing.T) {
	f := &fakeLib{}
	l := f.lib()
	if err := groupEnd(l); !errors.Is(err, ErrInvalidUsage) {
		t.Fatalf("end without start: %v", err)
	}
	if f.count("ncclGroupEnd") != 0 {
		t.Fatal("a stray end reached NCCL")
	}
	c := newFakeComm(t, f, 1, 0, options{})
	err := group(l, func() error {
		return group(l, func() error { // nested
			return firstErr(c.Send(1, 4, Float32, 0, 0), c.Recv(2, 4, Float32, 0, 0))
		})
	})
	if err != nil {
		t.Fatalf("group: %v", err)
	}
	var names []string
	for _, call := range f.calls {
		names = append(names, call.name)
	}
	if got := strings.Join(names[len(names)-6:], ","); got != "ncclGroupStart,ncclGroupStart,ncclSend,ncclRecv,ncclGroupEnd,ncclGroupEnd" {
		t.Errorf("calls %s", got)
	}
	// f's error comes back and the group is still ended.
	sentinel := errors.New("f failed")
	if err := group(l, func() error { return sentinel }); !errors.Is(err, sentinel) {
		t.Errorf("group: %v", err)
	}
	if f.count("ncclGroupStart") != f.count("ncclGroupEnd") {
		t.Error("unbalanced group")
	}
	// A panic in f still ends the group.
	func() {
		defer func() { _ = recover() }()
		_ = group(l, func() error { panic("boom") })
	}()
	if f.count("ncclGroupStart") != f.count("ncclGroupEnd") {
		t.Error("unbalanced group after a panic")
	}
	if err := groupEnd(l); !errors.Is(err, ErrInvalidUsage) {
		t.Errorf("end after balanced groups: %v", err)
	}
	groups.mu.Lock()
	open := len(groups.depth)
	groups.mu.Unlock()
	if open != 0 {
		t.Errorf("%d threads still counted in a group", open)
	}
	// A failing start leaves no group counted.
	f.setNext(InternalError, "")
	if err := groupStart(l); !errors.Is(err, ErrInternal) {
		t.Errorf("failing start: %v", err)
	}
	f.setNext(Success, "")
	if err := groupEnd(l); !errors.Is(err, ErrInvalidUsage) {
		t.Errorf("end after failed start: %v", err)
	}
	if err := Group(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Group(nil): %v", err)
	}
}
