//go:build linux

package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/cuda/nccl"
)

// engine is the CUDA gpu.Engine: an NCCL communicator whose collectives
// run on a raw stream of their own (nccl.Comm under choreo's fences: the
// collectives package orders them against each rank's GPU stream).
type engine struct {
	dev    *Device
	comm   *nccl.Comm
	stream *RawStream
	once   sync.Once
}

var _ gpu.EngineDevice = (*Device)(nil)

// ncclType maps choreo's element types to NCCL's; 16-bit integers have
// none.
var ncclType = map[gpu.DType]nccl.DataType{
	gpu.Float32: nccl.Float32, gpu.Float64: nccl.Float64, gpu.Float16: nccl.Float16, gpu.BFloat16: nccl.BFloat16,
	gpu.Int8: nccl.Int8, gpu.Int32: nccl.Int32, gpu.Int64: nccl.Int64, gpu.Uint8: nccl.Uint8,
}

// ncclOp maps the reductions.
var ncclOp = map[gpu.ReduceOp]nccl.RedOp{gpu.OpSum: nccl.Sum, gpu.OpProd: nccl.Prod, gpu.OpMin: nccl.Min, gpu.OpMax: nccl.Max}

// EngineSupports implements gpu.EngineDevice.
func (d *Device) EngineSupports(dt gpu.DType) bool {
	_, ok := ncclType[dt]
	return ok
}

// NewEngineID implements gpu.EngineDevice: an NCCL unique id.
func (d *Device) NewEngineID() ([]byte, error) {
	id, err := nccl.NewUniqueID()
	if err != nil {
		if errors.Is(err, nccl.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", err, gpu.ErrNoBackend)
		}
		return nil, fmt.Errorf("cuda: engine id: %w", err)
	}
	return id[:], nil
}

// NewEngine implements gpu.EngineDevice. NCCL's initialization waits for
// every rank and cannot be interrupted: when ctx ends first, NewEngine
// returns and the communicator is aborted once its initialization does
// return. The engine comes warmed up: NCCL sets up its connections in a
// communicator's first collective, which waits for every stream of the
// device (measured on the H200: an all-reduce that was the first beside a
// stream held at a fence wait never returned; after a warm-up, all-reduces
// beside it took 42 us to 0.5 ms), so NewEngine runs a one-element
// all-reduce before it returns, while the caller holds no stream.
func (d *Device) NewEngine(ctx context.Context, id []byte, n, rank int) (gpu.Engine, error) {
	var uid nccl.UniqueID
	if len(id) != len(uid) {
		return nil, badArgf("engine: an id of %d bytes, want %d", len(id), len(uid))
	}
	copy(uid[:], id)
	s, err := d.NewRawStream()
	if err != nil {
		return nil, fmt.Errorf("cuda: engine: %w", err)
	}
	type result struct {
		c   *nccl.Comm
		err error
	}
	done := make(chan result, 1)
	abandoned := make(chan struct{})
	go func() {
		c, err := nccl.InitRank(uid, n, rank, nccl.WithDevice(d))
		select {
		case done <- result{c, err}:
		case <-abandoned:
			if err == nil {
				_ = c.Abort()
			}
		}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			_ = s.Destroy()
			return nil, fmt.Errorf("cuda: engine rank %d of %d: %w", rank, n, r.err)
		}
		e := &engine{dev: d, comm: r.c, stream: s}
		if err := e.warmUp(ctx); err != nil {
			_ = e.Abort()
			return nil, fmt.Errorf("cuda: engine rank %d of %d: warm-up: %w", rank, n, err)
		}
		return e, nil
	case <-ctx.Done():
		close(abandoned)
		_ = s.Destroy()
		return nil, fmt.Errorf("cuda: engine rank %d of %d: the ranks did not all join: %w", rank, n, ctx.Err())
	}
}

// warmUp runs the engine's first collective: a one-element all-reduce.
func (e *engine) warmUp(ctx context.Context) error {
	b, err := e.dev.Alloc(4, gpu.DeviceMem)
	if err != nil {
		return err
	}
	defer b.Free()
	if err := e.AllReduce(b, b, 1, gpu.Float32, gpu.OpSum); err != nil {
		return err
	}
	return e.Sync(ctx)
}

// args are a collective's resolved arguments: the buffers' device
// addresses, NCCL's type and (where the call reduces) its reduction.
type args struct {
	in, out uintptr
	dt      nccl.DataType
	op      nccl.RedOp
}

// resolve resolves a collective's arguments.
func resolve(name string, in, out gpu.Buffer, dt gpu.DType, op gpu.ReduceOp, reduces bool) (args, error) {
	var a args
	var ok bool
	if a.dt, ok = ncclType[dt]; !ok {
		return a, badArgf("engine %s: NCCL has no %s", name, dt)
	}
	if a.op, ok = ncclOp[op]; reduces && !ok {
		return a, badArgf("engine %s: reduction %v", name, op)
	}
	var err error
	if a.in, err = DevicePointer(in); err != nil {
		return a, fmt.Errorf("cuda: engine %s: input: %w", name, err)
	}
	if a.out, err = DevicePointer(out); err != nil {
		return a, fmt.Errorf("cuda: engine %s: output: %w", name, err)
	}
	return a, nil
}

func (e *engine) AllReduce(in, out gpu.Buffer, count int, dt gpu.DType, op gpu.ReduceOp) error {
	a, err := resolve("allreduce", in, out, dt, op, true)
	if err != nil {
		return err
	}
	return e.comm.AllReduce(a.in, a.out, count, a.dt, a.op, e.stream.Handle())
}

func (e *engine) AllGather(in, out gpu.Buffer, count int, dt gpu.DType) error {
	a, err := resolve("allgather", in, out, dt, 0, false)
	if err != nil {
		return err
	}
	return e.comm.AllGather(a.in, a.out, count, a.dt, e.stream.Handle())
}

func (e *engine) ReduceScatter(in, out gpu.Buffer, count int, dt gpu.DType, op gpu.ReduceOp) error {
	a, err := resolve("reducescatter", in, out, dt, op, true)
	if err != nil {
		return err
	}
	return e.comm.ReduceScatter(a.in, a.out, count, a.dt, a.op, e.stream.Handle())
}

func (e *engine) Broadcast(in, out gpu.Buffer, count int, dt gpu.DType, root int) error {
	a, err := resolve("broadcast", in, out, dt, 0, false)
	if err != nil {
		return err
	}
	return e.comm.Broadcast(a.in, a.out, count, a.dt, root, e.stream.Handle())
}

// Sync waits for the stream; a failure NCCL reports meanwhile (a peer's
// abort) ends it too.
func (e *engine) Sync(ctx context.Context) error {
	if err := e.stream.Synchronize(ctx); err != nil {
		if aerr := e.comm.AsyncError(); aerr != nil {
			return fmt.Errorf("cuda: engine: %w (%w)", aerr, err)
		}
		return fmt.Errorf("cuda: engine: %w", err)
	}
	return e.comm.AsyncError()
}

// Abort aborts the communicator (its kernels end), then ends the stream.
func (e *engine) Abort() error { return e.end(e.comm.Abort) }

// Close destroys the communicator, then the stream.
func (e *engine) Close() error { return e.end(e.comm.Destroy) }

func (e *engine) end(f func() error) error {
	var err error
	e.once.Do(func() { err = errors.Join(f(), e.stream.Destroy()) })
	return err
}
