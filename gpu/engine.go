package gpu

import "context"

// Engine is one rank of a group of a vendor's collective library (NCCL
// under CUDA), bound to one device. Its collectives are enqueued on a
// stream of the engine's own, in call order, reading and writing device
// buffers of its device; Sync returns once everything enqueued so far has
// run, or fails when ctx ends first (the work then may still be running:
// Abort it). Every rank of the group must make the same collectives in
// the same order with matching counts, types, ops and roots (the caller
// matches them first). After Abort (which also ends the work in flight
// and makes the peers' calls fail rather than wait) or Close, calls fail
// with ErrClosed; both are idempotent.
type Engine interface {
	AllReduce(in, out Buffer, count int, dt DType, op ReduceOp) error
	AllGather(in, out Buffer, count int, dt DType) error
	ReduceScatter(in, out Buffer, count int, dt DType, op ReduceOp) error
	Broadcast(in, out Buffer, count int, dt DType, root int) error
	Sync(ctx context.Context) error
	Abort() error
	Close() error
}

// EngineDevice is implemented by devices that can run a collective engine.
// EngineSupports reports whether the engine handles dt (NCCL has no 16-bit
// integers). NewEngineID makes the identity of a new engine group (one rank
// makes it and sends it to the others); it fails with ErrNoBackend when
// the library is missing. NewEngine joins rank of n to the group id names
// and returns once every rank has joined, or fails when ctx ends first.
type EngineDevice interface {
	EngineSupports(dt DType) bool
	NewEngineID() ([]byte, error)
	NewEngine(ctx context.Context, id []byte, n, rank int) (Engine, error)
}
