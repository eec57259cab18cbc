package nccl

import (
	"math"
	"runtime"
	"sync"
)

// Device is what a communicator needs of a CUDA device: running a function
// on the calling goroutine with its OS thread locked and the device's
// context current there. *cuda.Device (gpu/cuda) is one.
type Device interface {
	OnContext(f func() error) error
}

// Option configures InitRank.
type Option func(*options)

type options struct {
	dev          Device
	forceByValue bool // tests: take ncclCommInitRank even where Scalable exists
}

// WithDevice makes the communicator use dev: InitRank and every later call
// run inside dev.OnContext, so NCCL finds dev's context on the thread.
// Without it NCCL uses the thread's current device (device 0 unless the
// caller made another current on a locked thread).
func WithDevice(dev Device) Option { return func(o *options) { o.dev = dev } }

// Comm is one rank's NCCL communicator (ncclComm_t) of a blocking
// configuration: InitRank returns once every rank has joined, and the
// calls enqueue work on the caller's stream and return. Count and Rank are
// fixed at InitRank and stay readable after the end.
//
// Abort (ncclCommAbort: also stops work still running on the GPU) and
// Destroy (ncclCommDestroy: lets enqueued work finish) end it; the first of
// them to be called makes every later call, new or already waiting to
// start, fail with ErrClosed, waits for the NCCL calls in progress on
// other goroutines to return (NCCL frees the communicator, so none may
// still be using it), then calls NCCL once. Later ends, concurrent or not,
// wait for that one and return nil. Methods are safe for concurrent use,
// though NCCL orders the calls of one communicator only as they are made:
// every rank must issue its collectives in the same order. End a
// communicator only after the groups that used it have ended: NCCL holds
// it until GroupEnd. A nil or zero Comm fails every call with
// ErrInvalidArgument.
type Comm struct {
	lib          *library
	dev          Device
	nranks, rank int

	mu       sync.Mutex
	idle     sync.Cond // signalled when inflight drops to 0
	handle   uintptr   // ncclComm_t; 0 once ended
	inflight int       // NCCL calls in progress
	ending   bool      // Abort or Destroy has begun
	ended    chan struct{}
}

// InitRank makes rank's communicator of nranks ranks from id (made by one
// rank with NewUniqueID and shared with the others). It blocks until all
// ranks have called it. Inside a group (GroupStart), NCCL defers the work
// to GroupEnd and the communicator is usable after it.
//
// The call is ncclCommInitRankScalable(&comm, nranks, rank, 1, &id, NULL)
// where the library has it (NCCL >= 2.23): it takes the id by pointer, and
// NCCL 2.23 to 2.30 replace a NULL config with NCCL_CONFIG_INITIALIZER
// (init.cc: "if (config == NULL) internalConfigPtr = &internalConfig"), so
// it reaches ncclCommInitRankDev with the same arguments ncclCommInitRank
// passes. Older libraries get ncclCommInitRank, which takes the 128-byte
// ncclUniqueId by value: purego v0.11 passes a struct that large on
// linux/amd64 by copying it to the stack (the System V ABI's MEMORY class)
// and on arm64 by reference to a copy (AAPCS64), but its own tests cover
// no struct over 64 bytes, so the pointer form comes first. Both forms are
// checked against a C library with NCCL's signatures (TestABIFakeLibrary)
// and against NCCL itself on a GPU (TestGPUInitByValue forces the
// by-value one).
func InitRank(id UniqueID, nranks, rank int, opts ...Option) (*Comm, error) {
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if err := checkInit(id, nranks, rank); err != nil {
		return nil, err
	}
	l, err := load()
	if err != nil {
		return nil, err
	}
	return initComm(l, o, id, nranks, rank)
}

// checkInit validates InitRank's arguments.
func checkInit(id UniqueID, nranks, rank int) error {
	const op = "init rank"
	if nranks < 1 || nranks > math.MaxInt32 {
		return badArgf(op, "%d ranks: want 1 to %d", nranks, math.MaxInt32)
	}
	if rank < 0 || rank >= nranks {
		return badArgf(op, "rank %d out of range [0, %d)", rank, nranks)
	}
	if id.IsZero() {
		return badArgf(op, "zero unique id (make one with NewUniqueID)")
	}
	return nil
}

// initComm makes the communicator on l (see InitRank for the entry point
// chosen).
func initComm(l *library, o options, id UniqueID, nranks, rank int) (*Comm, error) {
	const op = "init rank"
	c := &Comm{lib: l, dev: o.dev, nranks: nranks, rank: rank, ended: make(chan struct{})}
	c.idle.L = &c.mu
	// h and ids live on the heap (they escape into the C call), where the
	// collector does not move them; NCCL writes h before it returns and
	// copies ids.
	h := new(uintptr)
	ids := new(UniqueID)
	*ids = id
	err := c.onDevice(func() error {
		if l.ncclCommInitRankScalable != nil && !o.forceByValue {
			return l.check(op, "ncclCommInitRankScalable",
				l.ncclCommInitRankScalable(h, int32(nranks), int32(rank), 1, ids, nil))
		}
		return l.check(op, "ncclCommInitRank",
			l.ncclCommInitRank(h, int32(nranks), cUniqueID{internal: id}, int32(rank)))
	})
	if err != nil {
		if *h != 0 { // NCCL clears it on failure; an abort frees whatever is left
			_ = c.release(op, "ncclCommAbort", *h, func(h uintptr) result { return l.ncclCommAbort(h) })
		}
		return nil, err
	}
	if *h == 0 {
		return nil, &Error{Op: op, Call: "ncclCommInitRank", Result: InternalError, Desc: "NCCL returned success and no communicator"}
	}
	c.handle = *h
	return c, nil
}

// onDevice runs f on a locked OS thread, inside the device's OnContext
// when the communicator has a device.
func (c *Comm) onDevice(f func() error) error {
	if c.dev != nil {
		return c.dev.OnContext(f)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return f()
}

// Count is the number of ranks (0 for a nil Comm).
func (c *Comm) Count() int {
	if c == nil {
		return 0
	}
	return c.nranks
}

// Rank is this communicator's rank (-1 for a nil Comm).
func (c *Comm) Rank() int {
	if c == nil || c.lib == nil {
		return -1
	}
	return c.rank
}

// begin admits one NCCL call of op: it returns the handle, or an error if
// the communicator is nil, zero or ending. Every successful begin must be
// followed by end.
func (c *Comm) begin(op string) (uintptr, error) {
	if c == nil || c.lib == nil || c.ended == nil {
		return 0, badArgf(op, "nil or uninitialized communicator (make one with InitRank)")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ending {
		return 0, closedf(op, "communicator aborted or destroyed")
	}
	c.inflight++
	return c.handle, nil
}

// end closes what begin admitted.
func (c *Comm) end() {
	c.mu.Lock()
	c.inflight--
	if c.inflight == 0 && c.ending {
		c.idle.Broadcast()
	}
	c.mu.Unlock()
}

// call runs one NCCL call of op on the communicator's device.
func (c *Comm) call(op, name string, f func(h uintptr) result) error {
	h, err := c.begin(op)
	if err != nil {
		return err
	}
	defer c.end()
	return c.onDevice(func() error { return c.lib.check(op, name, f(h)) })
}

// AsyncError returns the communicator's asynchronous error
// (ncclCommGetAsyncError): nil while it is healthy, an *Error wrapping
// ErrRemote when a peer failed during work already enqueued, and so on.
// An error here means the communicator is unusable: Abort it.
func (c *Comm) AsyncError() error {
	const op = "async error"
	h, err := c.begin(op)
	if err != nil {
		return err
	}
	defer c.end()
	var async result
	if err := c.lib.check(op, "ncclCommGetAsyncError", c.lib.ncclCommGetAsyncError(h, &async)); err != nil {
		return err
	}
	return c.lib.check(op, "ncclCommGetAsyncError (asyncError)", async)
}

// Abort ends the communicator with ncclCommAbort, which also stops its
// work still running on the GPU; see Comm for the rules of ending.
// Idempotent.
func (c *Comm) Abort() error {
	return c.finish("abort", "ncclCommAbort", func(h uintptr) result { return c.lib.ncclCommAbort(h) })
}

// Destroy ends the communicator with ncclCommDestroy, which lets its
// enqueued work finish first; see Comm for the rules of ending.
// Idempotent.
func (c *Comm) Destroy() error {
	return c.finish("destroy", "ncclCommDestroy", func(h uintptr) result { return c.lib.ncclCommDestroy(h) })
}

// finish is Abort and Destroy.
func (c *Comm) finish(op, name string, f func(h uintptr) result) error {
	if c == nil || c.lib == nil || c.ended == nil {
		return badArgf(op, "nil or uninitialized communicator (make one with InitRank)")
	}
	c.mu.Lock()
	if c.ending {
		c.mu.Unlock()
		<-c.ended
		return nil
	}
	c.ending = true
	for c.inflight > 0 {
		c.idle.Wait()
	}
	h := c.handle
	c.handle = 0
	c.mu.Unlock()
	defer close(c.ended)
	return c.release(op, name, h, f)
}

// release frees handle h with f (ncclCommAbort or ncclCommDestroy) on the
// device, or, when the device no longer runs work (it was closed), on a
// locked thread without it: NCCL selects the communicator's device itself
// before freeing, and a communicator must not outlive its end.
func (c *Comm) release(op, name string, h uintptr, f func(h uintptr) result) error {
	ran := false
	run := func() error {
		ran = true
		return c.lib.check(op, name, f(h))
	}
	err := c.onDevice(run)
	if !ran {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		return run()
	}
	return err
}
