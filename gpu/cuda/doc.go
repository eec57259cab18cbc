// Package cuda is choreo's CUDA backend: the gpu interfaces on an NVIDIA
// GPU through the CUDA driver API, called with github.com/ebitengine/purego
// (no cgo). The package builds with CGO_ENABLED=0 on any Linux machine and
// opens libcuda.so.1 at run time; it registers itself as "cuda" with a
// priority above sim's, so gpu.Open("auto") picks it wherever a driver and
// a GPU are found and falls back to sim elsewhere. On a machine without the
// driver, Open fails with the dlopen message, wrapping ErrUnavailable and
// gpu.ErrNoBackend. On systems other than Linux the driver registers but
// never opens.
//
// # Contexts and threads
//
// A CUDA context is current per OS thread, and Go moves goroutines between
// threads. Every driver call that needs the context therefore runs either
// on a "driver thread" or inside onContext:
//
//   - A driver thread is a goroutine that called runtime.LockOSThread,
//     made the device's primary context current once
//     (cuDevicePrimaryCtxRetain at Open, cuCtxSetCurrent on the thread)
//     and never unlocks. A device has two: "main" (allocations, streams,
//     the kernel module; other goroutines hand it work through a small
//     typed call helper) and "reaper" (deferred frees).
//   - onContext locks the calling goroutine to its thread for the length
//     of one piece of work, makes the context current there (after
//     cuCtxGetCurrent; a thread that had another context gets it back)
//     and runs the work. A queue issues commands and queries its stream
//     this way, from whichever goroutine has the work: Submit itself
//     when the queue is idle, else the queue's issuer goroutine; the
//     completion poller for its periodic cuStreamQuery.
//
// Handing work to a locked thread costs a kernel wake-up whenever that
// thread has parked, which is why the hot paths run on the goroutine that
// has the work.
// Calls that need no context (cuGetErrorName) and pure memory accesses
// (fence words) run anywhere.
//
// # Memory
//
// DeviceMem is device memory (Bytes is nil); HostMem is pinned, portable,
// device-mapped host memory (cuMemHostAlloc PORTABLE|DEVICEMAP) whose
// Bytes is the slice over the host pointer. HostMem is zero-filled by
// Alloc; DeviceMem is not cleared (the gpu contract leaves it undefined):
// clearing needs GPU work, and an allocation must never wait for GPU work,
// which can sit behind a fence wait that only the allocating caller can
// release (streams share the device's hardware queues). Copy commands are
// cuMemcpyAsync with unified addresses on the queue's stream, ordered with
// everything else. Free is deferred until no queued command names the
// buffer and never reaches the driver: cuMemFree waits for the whole
// context, and while it waits every other allocation blocks, behind a
// stream that may be blocked on a fence wait. So device blocks
// (cuMemAlloc_v2) and pinned host blocks are cached by power-of-two size
// class, reused by later allocations without a hop to a driver thread, and
// given back only by Device.Close; blocks up to 256 KiB are carved out of
// 4 MiB slabs, so a cache miss for them reaches the driver once per slab.
//
// # Fence words
//
// Fence words are 4-byte slots, one per 64-byte cache line, carved out of
// 64 KiB slabs of host-mapped pinned memory. The CPU uses sync/atomic on
// the host address: Store is an atomic max (CAS loop), Load an atomic
// load, Wait polls (watchSpin: a short spin, then doubling sleeps,
// bounded by ctx and cancel). WaitValue is cuStreamWaitValue32_v2 with
// CU_STREAM_WAIT_VALUE_GEQ, which compares cyclically,
// (int32)(*addr - v) >= 0: gpu.StopValue 0x7FFFFFFF releases every wait
// for a smaller count, 0xFFFFFFFF would not.
//
// WriteValue has two implementations (Options.MonotonicKernel, or
// CHOREO_CUDA_WRITE=memop|kernel for devices opened by name):
//
//   - memop (the default): cuStreamWriteValue32_v2 with the default flags,
//     which fences like __threadfence_system, so the write lands after the
//     stream's earlier work is complete and visible. It is a plain
//     store, so the issuer writes max(v, the largest value issued for the
//     word, the word's current value): a word with a single GPU writer only
//     grows (by construction; choreo gives every word one writer).
//   - kernel: a one-thread kernel that stores max(word, v) between two
//     system-scope fences (membar.sys), deciding at execution time.
//
// The CPU may still release (store gpu.StopValue into) a word the GPU
// writes while a GPU write issued earlier is queued behind a wait. A plain
// store would then lower the released word. In both modes a queue
// therefore repairs every word its completed batch wrote: it raises it
// back to the largest value the CPU ever stored (before calling done).
// With memop the word can read low for the microseconds between the GPU's
// store and the repair, which only delays waiters, never releases one
// early; the kernel decides at execution time and leaves a window of a few
// nanoseconds. memop with the repair releases every wait on a release and
// keeps single-writer words from ever going down, both modes pass the
// conformance suite, and memop is the faster (BenchmarkRawRoundTrip*,
// BenchmarkQueueRoundTrip), so it is the default.
//
// # Queues, completions and bounds
//
// A queue is a non-blocking stream. Submit validates, takes leases on what
// the batch names and, when nothing is being issued or waiting and the
// batch fits the budget, issues it itself (no hand-off); otherwise it
// appends the batch to the queue's FIFO for the issuer goroutine. It never
// blocks on the GPU. At most Options.MaxInflightBatches (64) batches and
// Options.MaxInflightCommands (512) stream operations are on the GPU; more
// wait in the FIFO. This avoids the launch-queue trap: a stream blocked on
// a wait with thousands of operations queued behind it blocks the thread
// that enqueues, so no thread may enqueue unboundedly.
// Completions need no cgo callbacks: after each batch the issuing
// goroutine writes the next sequence number into the queue's completion
// word with a stream write; the poller goroutine watches that word (spin,
// then back off; a CPU store into any fence word of the device wakes it
// from a backoff sleep), completes batches strictly in order, and calls
// cuStreamQuery every millisecond of waiting so a kernel fault or sticky
// context error fails the unfinished batches with the driver's error.
// A command that fails to issue (a freed buffer, a driver error of that
// call alone) ends only its unit of a SubmitUnits batch; a driver error
// met while the stream has failed ends the whole batch. A done that
// panics is recovered. Queue.Close waits for the submitted batches up to
// ctx; past it the queue stores gpu.StopValue into every word named by a
// WaitValue that has not completed, so the stream drains, and completes
// every unfinished batch with gpu.ErrClosed (bounded again by
// Options.DrainTimeout).
//
// # Kernels
//
// fill, arange, add and scale for every dtype are CUDA C in
// kernels/ops.cu, compiled to PTX by kernels/gen.sh (nvcc -ptx
// -arch=compute_90), embedded with go:embed and loaded with
// cuModuleLoadData; the driver JIT-compiles the PTX for the GPU it finds.
// A build without the PTX still compiles, and Open then fails with
// ErrNoKernels. Their arithmetic follows the rules gpu/gputest checks
// (float16/bfloat16 in float32, rounded once to nearest even; integers
// wrap; float scalars on integers truncate toward zero, saturating).
// PeerReduce (peer.go) is the collectives' device path: one kernel that
// reduces or copies between buffers a peer table names.
//
// # Sharing with other processes and libraries
//
// ipc.go implements gpu.IPCDevice with CUDA IPC: Export gives a buffer's
// allocation handle and offset (asked once per buffer address), Import maps
// a handle once per allocation into an alias buffer; device memory goes
// back to the driver only at Close, so a mapping never outlives its
// memory while the exporting device is open. raw.go gives other libraries
// what they need (DevicePointer, a raw stream, OnContext). engine.go
// implements gpu.EngineDevice with NCCL (package nccl): an engine is a
// communicator on a raw stream of its own, made within a bound and warmed
// up by one collective before it is handed out, because a communicator's
// first collective waits for every stream of the device.
package cuda
