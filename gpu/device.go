package gpu

import "context"

// StopValue is the fence value a release stores. It satisfies every
// wait for a smaller value, also under CUDA's cyclic comparison
// (int32(word-v) >= 0), where 0xFFFFFFFF would not.
const StopValue uint32 = 0x7FFFFFFF

// MemKind says where a buffer lives.
type MemKind uint8

const (
	// DeviceMem is memory the GPU works on; the CPU may not see it
	// (Buffer.Bytes returns nil) and reaches it only through Copy commands.
	DeviceMem MemKind = iota
	// HostMem is pinned host memory that the GPU can read and write by Copy
	// commands and the CPU reads and writes through Buffer.Bytes.
	HostMem
)

// String names the memory kind.
func (k MemKind) String() string {
	if k == HostMem {
		return "host"
	}
	return "device"
}

// Properties describe a device.
type Properties struct {
	Backend           string // registered backend name: "sim", "cuda", "metal"
	Name              string // device name as the driver reports it
	MemoryBytes       uint64 // total device memory
	ComputeCapability string // "9.0" for an H200; empty where it means nothing
	// HostVisibleDeviceMem is true when DeviceMem buffers are also CPU
	// visible (Bytes is non-nil), so no staging copy is needed.
	HostVisibleDeviceMem bool
}

// Device is one GPU. Its methods are safe for concurrent use. Close frees
// the device's resources; queues, buffers and words created from it must not
// be used afterwards, and calls on a closed device return ErrClosed.
type Device interface {
	Properties() Properties
	// NewQueue creates an in-order command queue (one per stream).
	NewQueue() (Queue, error)
	// Alloc returns a buffer of n bytes (n >= 0) of the given kind. HostMem
	// is zero-filled; DeviceMem contents are undefined until written: an
	// allocation must never wait for GPU work (clearing device memory would
	// need some), because that work may sit behind a fence wait.
	Alloc(n int, kind MemKind) (Buffer, error)
	// NewFenceWord returns a word for fences, starting at 0.
	NewFenceWord() (FenceWord, error)
	Close() error
}

// Buffer is a range of memory owned by a device. Free is idempotent; a freed
// buffer named by a command makes that command fail with ErrClosed.
type Buffer interface {
	// Len is the size in bytes.
	Len() int
	// Kind says where the buffer lives.
	Kind() MemKind
	// Bytes is the CPU's view of the memory, or nil if the CPU cannot see it.
	// The slice aliases the buffer: GPU commands and CPU code must be ordered
	// by fences or completions, never by luck.
	Bytes() []byte
	Free() error
}

// FenceWord is one 32-bit word that GPU commands (WaitValue, WriteValue)
// and the CPU both reach. choreo gives each word a single writer: either the
// CPU (Store) or the GPU (WriteValue), never both, so every word only grows
// and no write lowers it. Reset is allowed only when no queued command
// names the word.
type FenceWord interface {
	// Load reads the word (an atomic load on the CPU).
	Load() uint32
	// Store raises the word to max(word, v) from the CPU and wakes any GPU
	// wait that v satisfies.
	Store(v uint32)
	// Wait blocks the calling goroutine until the word is >= v, ctx is done
	// (ctx.Err(), wrapped) or cancel is closed (ErrCanceled). It returns nil
	// at once if the word already is >= v.
	Wait(ctx context.Context, v uint32, cancel <-chan struct{}) error
	// Reset sets the word back to 0 for reuse by a new fence.
	Reset()
	// Free gives the word's memory back. Idempotent.
	Free()
}

// Queue runs batches of commands on the GPU strictly in submission order,
// and the commands of a batch in slice order. Submit validates the
// batch and returns an error at once for a bad command or a closed queue;
// otherwise done is called exactly once, from a goroutine of the backend,
// when the batch has completed (nil) or failed (the first failing
// command's error; the commands after it in that batch do not run). done
// must not block for long: it runs on the backend's completion path. A
// done that panics is recovered, silently, and the queue goes on with the
// batches after it: one caller's bug must not stop the others' work.
//
// SubmitUnits is Submit for a batch split into units (see units.go); it
// also returns an error at once for ends that ValidateUnits rejects. A
// failing command skips the rest of its own unit only; the later units
// still run, in order. done gets nil, a *BatchError naming every failed
// unit, or a plain error when the whole batch failed (the queue was closed
// before it completed, or the device broke: an asynchronous device error
// fails every unit). UnitErr reads one unit's outcome from either. With
// ends, a buffer or word already freed at the call fails its command when
// its unit runs, not the call: one unit's stale object must not fail the
// others. Empty ends make the batch one unit, and done then gets a plain
// error, as from Submit: Submit(b, done) is SubmitUnits(b, nil, done).
//
// Close stops accepting batches (Submit then returns ErrClosed) and waits
// for the submitted ones to finish, up to ctx's deadline. If ctx expires
// first, the queue releases every word named by a WaitValue it has not yet
// passed (it stores StopValue) so that the device drains, completes
// every unfinished batch with ErrClosed, and returns an error wrapping
// ctx.Err(). Close never blocks past ctx by more than the time the device
// needs to drain after that release. Methods are safe for concurrent use.
type Queue interface {
	Submit(batch []Command, done func(error)) error
	SubmitUnits(batch []Command, ends []int, done func(error)) error
	Close(ctx context.Context) error
}

// Driver opens devices of one backend.
type Driver interface {
	// Open opens the backend's default device, or returns an error wrapping
	// ErrNoBackend when the backend cannot run on this machine.
	Open() (Device, error)
	// Priority orders backends for "auto": the highest that opens wins.
	Priority() int
}
