//go:build linux

package nccl

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
)

// buildFake builds testdata/fakenccl.c, a stand-in with NCCL's C
// signatures that logs what it receives, and returns the .so's path. It
// skips where there is no C compiler.
func buildFake(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			t.Skip("skipping: no C compiler to build the fake library")
		}
	}
	so := filepath.Join(t.TempDir(), "libfakenccl.so")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", so, filepath.Join("testdata", "fakenccl.c")).CombinedOutput(); err != nil {
		t.Skipf("skipping: cannot build the fake library: %v\n%s", err, out)
	}
	return so
}

// fakeNCCL builds the fake library and opens it as the library, with its
// log reader and reset.
func fakeNCCL(t *testing.T) (l *library, log func() string, reset func(next Result)) {
	t.Helper()
	so := buildFake(t)
	l, err := openLibrary([]string{"/nonexistent/libnccl.so.2", so})
	if err != nil {
		t.Fatalf("openLibrary: %v", err)
	}
	if l.path != so {
		t.Errorf("opened %q, want %q", l.path, so)
	}
	h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL) // the same handle, counted
	if err != nil {
		t.Fatal(err)
	}
	var fakeLog func() string
	var fakeReset func(next Result)
	purego.RegisterLibFunc(&fakeLog, h, "fakeLog")
	purego.RegisterLibFunc(&fakeReset, h, "fakeReset")
	return l, fakeLog, fakeReset
}

// fnv is the FNV-1a hash the fake prints for an id.
func fnv(id UniqueID) string {
	h := uint64(1469598103934665603)
	for _, b := range id {
		h ^= uint64(b)
		h *= 1099511628211
	}
	return fmt.Sprintf("%016x", h)
}

// TestABIFakeLibrary drives the real purego bindings against a C library
// with NCCL's signatures: every argument (the 128-byte ncclUniqueId by
// value and by pointer, 64-bit counts, enums, ranks after the struct, the
// stream) must arrive as C declares it, and results and strings come back.
func TestABIFakeLibrary(t *testing.T) {
	l, log, reset := fakeNCCL(t)
	expect := func(what, want string) {
		t.Helper()
		if got := log(); got != want {
			t.Errorf("%s: the library saw\n%q\nwant\n%q", what, got, want)
		}
		reset(Success)
	}
	reset(Success)

	var got UniqueID
	if err := l.check("new unique id", "ncclGetUniqueId", l.ncclGetUniqueId(&got)); err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		if b != byte(255-i) {
			t.Fatalf("unique id byte %d = %d, want %d", i, b, 255-i)
		}
	}
	expect("get unique id", "ncclGetUniqueId\n")

	id := testID()
	c, err := initComm(l, options{}, id, 1000, 999)
	if err != nil {
		t.Fatalf("init (scalable): %v", err)
	}
	expect("init (scalable)", fmt.Sprintf("ncclCommInitRankScalable nranks=1000 rank=999 nId=1 id=%s config=(nil)\n", fnv(id)))
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	expect("destroy", "ncclCommDestroy ok=1\n")

	c, err = initComm(l, options{forceByValue: true}, id, 1000, 999)
	if err != nil {
		t.Fatalf("init (by value): %v", err)
	}
	expect("init (by value)", fmt.Sprintf("ncclCommInitRank nranks=1000 rank=999 id=%s first=%d last=%d\n", fnv(id), id[0], id[127]))

	const s, r, st = 0x1000, 0x2000, 0x77
	big := 1 << 33 // a count that needs all 64 bits of size_t
	for _, k := range []struct {
		name string
		call func() error
		want string
	}{
		{"allreduce", func() error { return c.AllReduce(s, r, big, Int8, Avg, st) }, "ncclAllReduce 0x1000 0x2000 8589934592 0 4 ok=1 0x77\n"},
		{"allgather", func() error { return c.AllGather(s, r, 12, Float32, st) }, "ncclAllGather 0x1000 0x2000 12 7 ok=1 0x77\n"},
		{"reducescatter", func() error { return c.ReduceScatter(s, r, 13, BFloat16, Min, st) }, "ncclReduceScatter 0x1000 0x2000 13 9 3 ok=1 0x77\n"},
		{"broadcast", func() error { return c.Broadcast(s, r, 14, Float64, 998, st) }, "ncclBroadcast 0x1000 0x2000 14 8 998 ok=1 0x77\n"},
		{"reduce", func() error { return c.Reduce(s, r, 15, Uint64, Prod, 997, 0) }, "ncclReduce 0x1000 0x2000 15 5 1 997 ok=1 (nil)\n"},
		{"send", func() error { return c.Send(s, 16, Float16, 5, st) }, "ncclSend 0x1000 16 6 5 ok=1 0x77\n"},
		{"recv", func() error { return c.Recv(r, 17, Uint32, 6, st) }, "ncclRecv 0x2000 17 3 6 ok=1 0x77\n"},
	} {
		if err := k.call(); err != nil {
			t.Errorf("%s: %v", k.name, err)
		}
		expect(k.name, k.want)
	}

	if err := group(l, func() error { return c.Send(s, 1, Int32, 0, st) }); err != nil {
		t.Errorf("group: %v", err)
	}
	expect("group", "ncclGroupStart\nncclSend 0x1000 1 2 0 ok=1 0x77\nncclGroupEnd\n")

	err = c.AsyncError()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "remote process exited") {
		t.Errorf("AsyncError: %v; want the remote error the library reports", err)
	}
	reset(Success)

	reset(RemoteError)
	err = c.AllReduce(s, r, 1, Float32, Sum, st)
	if !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "remote process exited or there was a network error: fake last error") {
		t.Errorf("failing AllReduce: %v", err)
	}
	reset(Success)

	var v int32
	if err := l.check("version", "ncclGetVersion", l.ncclGetVersion(&v)); err != nil || v != 22803 {
		t.Errorf("version %d, %v", v, err)
	}
	reset(Success)

	if err := c.Abort(); err != nil {
		t.Fatal(err)
	}
	expect("abort", "ncclCommAbort ok=1\n")
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	expect("destroy after abort", "")
}

// loaderEnv makes TestLoaderChild report what the process-wide loader
// found.
const loaderEnv = "CHOREO_NCCL_TEST_LOADER"

func TestLoaderChild(t *testing.T) {
	if os.Getenv(loaderEnv) == "" {
		t.Skip("helper: runs in a child process of TestLoaderFromEnv")
	}
	v, err := Version()
	p, _ := LibraryPath()
	_, err2 := Version() // resolved once: the same answer
	fmt.Printf("LOADER version=%d path=%s err=%v same=%v\n", v, p, err, fmt.Sprint(err) == fmt.Sprint(err2))
}

// runLoader runs TestLoaderChild with CHOREO_NCCL_LIB=lib.
func runLoader(t *testing.T, lib string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoaderChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), loaderEnv+"=1", LibEnv+"="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "LOADER ") {
			return line
		}
	}
	t.Fatalf("child printed no LOADER line:\n%s", out)
	return ""
}

// CHOREO_NCCL_LIB is tried first; a bad one is named in the error (and the
// default names after it), or passed over for an installed library.
func TestLoaderFromEnv(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		line := runLoader(t, "/nonexistent/choreo/libnccl.so.2")
		t.Log(line)
		if !strings.Contains(line, "same=true") {
			t.Errorf("second load differs: %s", line)
		}
		if strings.Contains(line, "err=<nil>") { // an installed NCCL took over
			if !strings.Contains(line, "path=libnccl.so") {
				t.Errorf("loaded from an unexpected path: %s", line)
			}
			return
		}
		i := strings.Index(line, "/nonexistent/choreo/libnccl.so.2")
		j := strings.Index(line, "libnccl.so.2 (")
		if i < 0 || j < 0 || !strings.Contains(line, "libnccl.so (") || !strings.Contains(line, ErrUnavailable.Error()) || j < i {
			t.Errorf("error does not list the paths tried in order: %s", line)
		}
	})
	t.Run("fake", func(t *testing.T) {
		so := buildFake(t)
		line := runLoader(t, so)
		if want := "LOADER version=22803 path=" + so + " err=<nil> same=true"; line != want {
			t.Errorf("got  %s\nwant %s", line, want)
		}
	})
}
