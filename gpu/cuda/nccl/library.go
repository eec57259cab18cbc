package nccl

import (
	"os"
	"sync"
	"unsafe"
)

// LibEnv names the environment variable with the path of the NCCL library
// to try before the default names.
const LibEnv = "CHOREO_NCCL_LIB"

// defaultLibNames are the names tried after LibEnv, through the dynamic
// loader's search path.
var defaultLibNames = []string{"libnccl.so.2", "libnccl.so"}

// libPaths lists the paths to try, in order: LibEnv's value when set,
// then defaultLibNames.
func libPaths() []string {
	var paths []string
	if p := os.Getenv(LibEnv); p != "" {
		paths = append(paths, p)
	}
	return append(paths, defaultLibNames...)
}

// result is ncclResult_t as the C calls return it.
type result = Result

// cUniqueID is ncclUniqueId, `struct { char internal[128]; }`, for the one
// entry point that takes it by value (ncclCommInitRank). purego passes
// structs, never arrays, by value.
type cUniqueID struct{ internal [uniqueIDBytes]byte }

// library is the table of NCCL entry points, resolved once per process
// (library_linux.go) or made up by a test. Each field is named after the C
// function it calls. C int is int32, size_t and every pointer NCCL keeps
// (communicator, stream, device buffer) uintptr. Fields marked optional
// may be nil: the library predates them. The table holds no state of a
// communicator, so any number share it.
type library struct {
	path string // what was opened, for messages

	ncclGetVersion           func(v *int32) result
	ncclGetUniqueId          func(id *UniqueID) result
	ncclGetErrorString       func(r result) string
	ncclGetLastError         func(comm uintptr) string                                                                 // optional (2.13)
	ncclCommInitRank         func(comm *uintptr, nranks int32, id cUniqueID, rank int32) result                        // by value: see initComm
	ncclCommInitRankScalable func(comm *uintptr, nranks, rank, nID int32, ids *UniqueID, config unsafe.Pointer) result // optional (2.23)
	ncclCommDestroy          func(comm uintptr) result
	ncclCommAbort            func(comm uintptr) result
	ncclCommGetAsyncError    func(comm uintptr, r *result) result
	ncclAllReduce            func(send, recv, count uintptr, dt DataType, op RedOp, comm, stream uintptr) result
	ncclAllGather            func(send, recv, sendCount uintptr, dt DataType, comm, stream uintptr) result
	ncclReduceScatter        func(send, recv, recvCount uintptr, dt DataType, op RedOp, comm, stream uintptr) result
	ncclBroadcast            func(send, recv, count uintptr, dt DataType, root int32, comm, stream uintptr) result
	ncclReduce               func(send, recv, count uintptr, dt DataType, op RedOp, root int32, comm, stream uintptr) result
	ncclSend                 func(send, count uintptr, dt DataType, peer int32, comm, stream uintptr) result
	ncclRecv                 func(recv, count uintptr, dt DataType, peer int32, comm, stream uintptr) result
	ncclGroupStart           func() result
	ncclGroupEnd             func() result
}

// symbol is one entry point of the table: where to register it, its
// exported name, and whether the library may lack it.
type symbol struct {
	fn       any
	name     string
	optional bool
}

// symbols lists every entry point of l.
func (l *library) symbols() []symbol {
	return []symbol{
		{&l.ncclGetVersion, "ncclGetVersion", false},
		{&l.ncclGetUniqueId, "ncclGetUniqueId", false},
		{&l.ncclGetErrorString, "ncclGetErrorString", false},
		{&l.ncclGetLastError, "ncclGetLastError", true},
		{&l.ncclCommInitRank, "ncclCommInitRank", false},
		{&l.ncclCommInitRankScalable, "ncclCommInitRankScalable", true},
		{&l.ncclCommDestroy, "ncclCommDestroy", false},
		{&l.ncclCommAbort, "ncclCommAbort", false},
		{&l.ncclCommGetAsyncError, "ncclCommGetAsyncError", false},
		{&l.ncclAllReduce, "ncclAllReduce", false},
		{&l.ncclAllGather, "ncclAllGather", false},
		{&l.ncclReduceScatter, "ncclReduceScatter", false},
		{&l.ncclBroadcast, "ncclBroadcast", false},
		{&l.ncclReduce, "ncclReduce", false},
		{&l.ncclSend, "ncclSend", false},
		{&l.ncclRecv, "ncclRecv", false},
		{&l.ncclGroupStart, "ncclGroupStart", false},
		{&l.ncclGroupEnd, "ncclGroupEnd", false},
	}
}

var loaded struct {
	once sync.Once
	lib  *library
	err  error
}

// load opens the library from libPaths, once per process; the error wraps
// ErrUnavailable and names every path tried.
func load() (*library, error) {
	loaded.once.Do(func() { loaded.lib, loaded.err = openLibrary(libPaths()) })
	return loaded.lib, loaded.err
}

// check turns the result of call into an *Error of op; nil for Success.
func (l *library) check(op, call string, r result) error {
	if r == Success {
		return nil
	}
	e := &Error{Op: op, Call: call, Result: r}
	if l.ncclGetErrorString != nil {
		e.Desc = l.ncclGetErrorString(r)
	}
	if l.ncclGetLastError != nil {
		e.Last = l.ncclGetLastError(0)
	}
	return e
}

// Version returns the version code of the NCCL library (ncclGetVersion):
// major*10000 + minor*100 + patch since 2.9 (22803 for 2.28.3).
func Version() (int, error) {
	l, err := load()
	if err != nil {
		return 0, err
	}
	var v int32
	if err := l.check("version", "ncclGetVersion", l.ncclGetVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// LibraryPath is the path or name of the NCCL library in use, as it was
// opened (a default name is resolved by the dynamic loader).
func LibraryPath() (string, error) {
	l, err := load()
	if err != nil {
		return "", err
	}
	return l.path, nil
}
