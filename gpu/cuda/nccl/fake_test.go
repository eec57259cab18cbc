package nccl

import (
	"sync"
	"unsafe"
)

// fakeCall is one NCCL call the fake library saw.
type fakeCall struct {
	name        string
	send, recv  uintptr
	count       uintptr
	dt          DataType
	op          RedOp
	root        int32 // root or peer
	comm        uintptr
	stream      uintptr
	nranks      int32
	rank        int32
	nID         int32
	id          UniqueID
	configIsNil bool
}

// fakeLib is a library made of Go functions that record their calls and
// answer with next (Success unless a test sets it). Hooks let a test block
// or fail one entry point.
type fakeLib struct {
	mu      sync.Mutex
	calls   []fakeCall
	next    Result
	last    string
	handle  uintptr
	onCall  func(name string) // runs inside every call, outside mu
	noScale bool              // leave ncclCommInitRankScalable out
}

func (f *fakeLib) record(c fakeCall) Result {
	if f.onCall != nil {
		f.onCall(c.name)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	return f.next
}

func (f *fakeLib) setNext(r Result, last string) {
	f.mu.Lock()
	f.next, f.last = r, last
	f.mu.Unlock()
}

func (f *fakeLib) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.name == name {
			n++
		}
	}
	return n
}

func (f *fakeLib) lastCall() fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return fakeCall{}
	}
	return f.calls[len(f.calls)-1]
}

// lib builds the table.
func (f *fakeLib) lib() *library {
	if f.handle == 0 {
		f.handle = 0xC0FFEE
	}
	l := &library{
		path: "fake",
		ncclGetVersion: func(v *int32) Result {
			*v = 22803
			return f.record(fakeCall{name: "ncclGetVersion"})
		},
		ncclGetUniqueId: func(id *UniqueID) Result {
			id[0], id[127] = 1, 2
			return f.record(fakeCall{name: "ncclGetUniqueId"})
		},
		ncclGetErrorString: func(r Result) string { return "fake description of " + r.String() },
		ncclGetLastError: func(uintptr) string {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.last
		},
		ncclCommInitRank: func(comm *uintptr, nranks int32, id cUniqueID, rank int32) Result {
			r := f.record(fakeCall{name: "ncclCommInitRank", nranks: nranks, rank: rank, id: id.internal})
			if r == Success {
				*comm = f.handle
			}
			return r
		},
		ncclCommDestroy: func(comm uintptr) Result { return f.record(fakeCall{name: "ncclCommDestroy", comm: comm}) },
		ncclCommAbort:   func(comm uintptr) Result { return f.record(fakeCall{name: "ncclCommAbort", comm: comm}) },
		ncclCommGetAsyncError: func(comm uintptr, r *Result) Result {
			*r = Success
			return f.record(fakeCall{name: "ncclCommGetAsyncError", comm: comm})
		},
		ncclAllReduce: func(send, recv, count uintptr, dt DataType, op RedOp, comm, stream uintptr) Result {
			return f.record(fakeCall{name: "ncclAllReduce", send: send, recv: recv, count: count, dt: dt, op: op, comm: comm, stream: stream})
		},
		ncclAllGather: func(send, recv, count uintptr, dt DataType, comm, stream uintptr) Result {
			return f.record(fakeCall{name: "ncclAllGather", send: send, recv: recv, count: count, dt: dt, comm: comm, stream: stream})
		},
		ncclReduceScatter: func(send, recv, count uintptr, dt DataType, op RedOp, comm, stream uintptr) Result {
			return f.record(fakeCall{name: "ncclReduceScatter", send: send, recv: recv, count: count, dt: dt, op: op, comm: comm, stream: stream})
		},
		ncclBroadcast: func(send, recv, count uintptr, dt DataType, root int32, comm, stream uintptr) Result {
			return f.record(fakeCall{name: "ncclBroadcast", send: send, recv: recv, count: count, dt: dt, root: root, comm: comm, stream: stream})
		},
		ncclReduce: func(send, recv, count uintptr, dt DataType, op RedOp, root int32, comm, stream uintptr) Result {
			return f.record(fakeCall{name: "ncclReduce", send: send, recv: recv, count: count, dt: dt, op: op, root: root, comm: comm, stream: stream})
		},
		ncclSend: func(send, count uintptr, dt DataType, peer int32, comm, stream uintptr) Result {
			return f.record(fakeCall{name: "ncclSend", send: send, count: count, dt: dt, root: peer, comm: comm, stream: stream})
		},
		ncclRecv: func(recv, count uintptr, dt DataType, peer int32, comm, stream uintptr) Result {
			return f.record(fakeCall{name: "ncclRecv", recv: recv, count: count, dt: dt, root: peer, comm: comm, stream: stream})
		},
		ncclGroupStart: func() Result { return f.record(fakeCall{name: "ncclGroupStart"}) },
		ncclGroupEnd:   func() Result { return f.record(fakeCall{name: "ncclGroupEnd"}) },
	}
	if !f.noScale {
		l.ncclCommInitRankScalable = func(comm *uintptr, nranks, rank, nID int32, ids *UniqueID, config unsafe.Pointer) Result {
			r := f.record(fakeCall{name: "ncclCommInitRankScalable", nranks: nranks, rank: rank, nID: nID, id: *ids, configIsNil: config == nil})
			if r == Success {
				*comm = f.handle
			}
			return r
		}
	}
	return l
}

// fakeDevice counts OnContext calls; when closed it fails them without
// running f, as a closed cuda.Device does.
type fakeDevice struct {
	mu     sync.Mutex
	calls  int
	closed bool
}

func (d *fakeDevice) OnContext(f func() error) error {
	d.mu.Lock()
	closed := d.closed
	d.calls++
	d.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return f()
}

// testID is a non-zero unique id.
func testID() UniqueID {
	var id UniqueID
	for i := range id {
		id[i] = byte(i + 1)
	}
	return id
}
