// Package nccl drives NVIDIA's NCCL (libnccl.so.2) without cgo: the
// library is opened at run time with github.com/ebitengine/purego, so the
// package builds with CGO_ENABLED=0 everywhere and works wherever the
// library is found. It is the binding under a future NCCL engine of the
// collectives (issue 14); it knows nothing of choreo's arrays or streams.
//
// # Finding the library
//
// The first use opens, in order, the path in CHOREO_NCCL_LIB (when set),
// "libnccl.so.2" and "libnccl.so" (the dynamic loader's search:
// LD_LIBRARY_PATH, the ld.so cache, /usr/lib/...), once per process. When
// none opens, or one lacks an entry point, every call fails with an error
// wrapping ErrUnavailable that names each path tried and why it failed.
// On systems other than Linux every call fails that way.
//
// # Memory, streams and contexts
//
// Buffers are device addresses and streams are raw cudaStream_t handles,
// both uintptr: gpu/cuda gives them for its devices (cuda.DevicePointer,
// Device.NewRawStream). Collective calls only enqueue work on the stream
// and return; the caller waits on the stream and keeps the memory alive
// until then. NCCL takes the CUDA device from the calling OS thread, so a
// communicator made with WithDevice runs every call inside that device's
// OnContext (thread locked, primary context current); without it, calls
// use whatever the thread has (device 0's primary context by default).
//
// # Groups
//
// NCCL's group state (ncclGroupStart/End) belongs to the OS thread.
// GroupStart therefore locks the calling goroutine to its thread until the
// matching GroupEnd, which must come from the same goroutine; Group wraps
// the pair around a function and is the safer form.
//
// # Communicators
//
// InitRank makes a communicator through ncclCommInitRankScalable with one
// unique id and a NULL config (NCCL >= 2.23), which takes the 128-byte
// ncclUniqueId by pointer; older libraries fall back to ncclCommInitRank,
// which takes it by value (see comm.go for why both are sound). Abort and
// Destroy end a communicator, idempotently and safely from any goroutine;
// later calls fail with ErrClosed.
//
// # Errors
//
// Failed NCCL calls return an *Error naming the operation, the entry
// point, the ncclResult_t with NCCL's description of it and NCCL's last
// error message; it unwraps to the sentinel for its result (ErrCUDA,
// ErrSystem, ErrInternal, ErrInvalidArgument, ErrInvalidUsage, ErrRemote,
// ErrInProgress). Arguments are checked before NCCL sees them (errors wrap
// ErrInvalidArgument, which is choreo's gpu.ErrBadArgument), so no call
// panics on bad input.
package nccl
