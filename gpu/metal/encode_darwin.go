//go:build darwin

package metal

import (
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/progrium/darwinkit/macos/metal"
	"github.com/progrium/darwinkit/objc"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/metalshader"
)

// encoder turns one batch into command buffers on the worker goroutine,
// inside the batch's autorelease pool. It keeps at most one open command
// buffer and one open compute encoder (a serial one: dispatches run in
// order, each followed by a memory barrier). darwinkit traps are sent with
// objc.Call: setComputePipelineState:, setBuffer:offset:atIndex:,
// encodeWaitForEvent:value:, encodeSignalEvent:value:; endEncoding is
// reached by re-wrapping the encoder as an MTLCommandEncoder.
type encoder struct {
	q   *queue
	b   *batch
	cb  metal.CommandBufferObject         // autoreleased; zero when none open
	enc metal.ComputeCommandEncoderObject // autoreleased; zero when none open
}

// encode encodes and commits b unit by unit. A command that fails to
// encode ends its unit (the batch, without ends, or once the queue has
// stopped): the commands before it are still committed (they run), and so
// are the later units; b.failed collects the failed units.
func (q *queue) encode(b *batch) error {
	e := &encoder{q: q, b: b}
	defer e.commit()
	n := len(b.cmds)
	for u, start := 0, 0; start < n; u++ {
		end := n
		if b.ends != nil {
			end = b.ends[u]
		}
		for i := start; i < end; i++ {
			c := b.cmds[i]
			if err := e.command(i, c); err != nil {
				err = fmt.Errorf("metal: command %d %v: %w", i, c, err)
				if b.ends == nil || q.stopped.Load() {
					return err
				}
				b.failed = append(b.failed, gpu.UnitError{Unit: u, Command: i, Err: err})
				break
			}
		}
		start = end
	}
	return nil
}

func (e *encoder) command(i int, c gpu.Command) error {
	if needsHost(c) {
		return e.host(c)
	}
	switch c := c.(type) {
	case gpu.Fill:
		return e.op(metalshader.Fill, c.DType, c.N, metalshader.Params{A: c.Value.Bits(c.DType)}, c.Dst)
	case gpu.Arange:
		p := metalshader.Params{A: uint64(c.Start.I), B: uint64(c.Step.I)}
		if c.DType.IsFloat() {
			p = metalshader.Params{A: f32bits(c.Start), B: f32bits(c.Step)}
		}
		return e.op(metalshader.Arange, c.DType, c.N, p, c.Dst)
	case gpu.Copy:
		size := copyElemSize(c)
		p := metalshader.Params{A: uint64(c.SrcOff / size), B: uint64(c.DstOff / size)}
		return e.op(metalshader.Copy, copyDType(size), c.Bytes/size, p, c.Dst, c.Src)
	case gpu.Add:
		return e.op(metalshader.Add, c.DType, c.N, metalshader.Params{}, c.Dst, c.A, c.B)
	case gpu.Scale:
		p := metalshader.Params{A: uint64(c.Factor.I)}
		if c.DType.IsFloat() {
			p = metalshader.Params{A: f32bits(c.Factor)}
		}
		return e.op(metalshader.Scale, c.DType, c.N, p, c.Dst, c.Src)
	case gpu.WaitValue:
		return e.wait(i, c)
	case gpu.WriteValue:
		return e.write(c)
	}
	return fmt.Errorf("unknown command type %T: %w", c, gpu.ErrBadArgument)
}

// f32bits is a Scalar as float32 bits, for the float kernels' Params.
func f32bits(s gpu.Scalar) uint64 { return uint64(math.Float32bits(float32(s.Float64()))) }

// op dispatches an element-wise kernel over n elements; bufs are dst then
// the sources, bound at BindDst, BindA, BindB.
func (e *encoder) op(op metalshader.Op, dt gpu.DType, n int, p metalshader.Params, bufs ...gpu.Buffer) error {
	if n == 0 {
		return nil
	}
	kernel, ok := metalshader.OpKernel(op, dt)
	if !ok {
		return fmt.Errorf("no %s kernel for %s: %w", op, dt, gpu.ErrBadArgument)
	}
	var binds [3]metal.BufferObject
	for i, b := range bufs {
		obj, _, err := e.ref(b)
		if err != nil {
			return err
		}
		binds[i] = obj
	}
	p.N = uint32(n)
	if err := e.dispatch(kernel, n, binds, p); err != nil {
		return err
	}
	e.markDirty(bufs[0].(*buffer), binds[0])
	return nil
}

// ref retains a buffer for the batch.
func (e *encoder) ref(b gpu.Buffer) (metal.BufferObject, []byte, error) {
	obj, data, err := b.(*buffer).ref()
	if err != nil {
		return obj, nil, err
	}
	e.b.retained = append(e.b.retained, obj.Object)
	return obj, data, nil
}

// markDirty records, in fast fence mode, that the queue wrote b: the next
// WriteValue makes it CPU-visible with input_coherent first.
func (e *encoder) markDirty(b *buffer, obj metal.BufferObject) {
	if e.q.dev.cfg.fence != FenceShared {
		return
	}
	if _, ok := e.q.dirty[b]; ok {
		return
	}
	obj.Retain()
	e.q.dirty[b] = dirtyBuf{obj: obj, words: (max(b.n, 1) + bufferAlign - 1) / bufferAlign * bufferAlign / 4}
}

// dispatch encodes one kernel over threads threads (1-D), binding bufs at
// BindDst, BindA, BindB (zero entries are skipped), p at BindParams and
// the batch's status slot at BindStatus, then a memory barrier.
func (e *encoder) dispatch(kernel string, threads int, bufs [3]metal.BufferObject, p metalshader.Params) error {
	pl, err := e.q.dev.pipes.get(kernel)
	if err != nil {
		return err
	}
	enc := e.compute()
	objc.Call[objc.Void](enc, objc.Sel("setComputePipelineState:"), pl.pso)
	for i, buf := range bufs {
		if !buf.IsNil() {
			objc.Call[objc.Void](enc, objc.Sel("setBuffer:offset:atIndex:"), buf, uint(0), uint(i))
		}
	}
	enc.SetBytesLengthAtIndex(unsafe.Pointer(&p), uint(metalshader.ParamsSize), metalshader.BindParams)
	objc.Call[objc.Void](enc, objc.Sel("setBuffer:offset:atIndex:"), e.q.status, uint(4*e.b.slot), uint(metalshader.BindStatus))
	group := min(uint64(pl.maxThreads), uint64(threads))
	enc.DispatchThreadsThreadsPerThreadgroup(
		metal.Size{Width: uint64(threads), Height: 1, Depth: 1},
		metal.Size{Width: group, Height: 1, Depth: 1})
	enc.MemoryBarrierWithScope(metal.BarrierScopeBuffers)
	return nil
}

// wait encodes a WaitValue (later commands are held back until the word
// is reached): the bounded fence_wait kernel on a shared
// word, or encodeWaitForEvent on an event followed by stream_order.
func (e *encoder) wait(i int, c gpu.WaitValue) error {
	switch w := c.Word.(type) {
	case *sharedWord:
		obj, err := w.ref()
		if err != nil {
			return err
		}
		e.b.retained = append(e.b.retained, obj.Object)
		p := metalshader.Params{N: c.Value, A: e.q.dev.cfg.waitPolls, B: uint64(metalshader.WaitTimeoutStatus(i))}
		return e.dispatch(metalshader.FenceWait, 1, [3]metal.BufferObject{obj}, p)
	case *eventWord:
		ev, base, err := w.ref()
		if err != nil {
			return err
		}
		e.b.retained = append(e.b.retained, ev.Object)
		e.endCompute()
		objc.Call[objc.Void](e.commandBuffer(), objc.Sel("encodeWaitForEvent:value:"), ev, base+uint64(c.Value))
		return e.dispatch(metalshader.StreamOrder, 1, [3]metal.BufferObject{}, metalshader.Params{})
	}
	return fmt.Errorf("fence word %T is not a metal word: %w", c.Word, gpu.ErrBadArgument)
}

// write encodes a WriteValue (monotonic, after earlier writes are visible
// to the CPU). Shared word: input_coherent over
// every buffer the queue wrote since the last WriteValue, then the
// monotonic fence_update. Event: stream_order (so the signal follows the
// queue's earlier command buffers), then encodeSignalEvent, which Metal
// performs once every earlier command of the command buffer completed.
func (e *encoder) write(c gpu.WriteValue) error {
	switch w := c.Word.(type) {
	case *sharedWord:
		obj, err := w.ref()
		if err != nil {
			return err
		}
		e.b.retained = append(e.b.retained, obj.Object)
		for b, d := range e.q.dirty {
			// The batch takes over the dirty set's reference.
			e.b.retained = append(e.b.retained, d.obj.Object)
			delete(e.q.dirty, b)
			if err := e.dispatch(metalshader.InputCoherent, d.words, [3]metal.BufferObject{d.obj},
				metalshader.Params{N: uint32(d.words)}); err != nil {
				return err
			}
		}
		return e.dispatch(metalshader.FenceUpdate, 1, [3]metal.BufferObject{obj}, metalshader.Params{N: c.Value})
	case *eventWord:
		ev, base, err := w.ref()
		if err != nil {
			return err
		}
		e.b.retained = append(e.b.retained, ev.Object)
		if err := e.dispatch(metalshader.StreamOrder, 1, [3]metal.BufferObject{}, metalshader.Params{}); err != nil {
			return err
		}
		e.endCompute()
		objc.Call[objc.Void](e.commandBuffer(), objc.Sel("encodeSignalEvent:value:"), ev, base+uint64(c.Value))
		return nil
	}
	return fmt.Errorf("fence word %T is not a metal word: %w", c.Word, gpu.ErrBadArgument)
}

// host runs a CPU command in queue order: commit what is encoded, wait for
// the queue's last command buffer (all earlier GPU work, bounded by the
// same releases as the GPU's waits, and by Close), skip if the batch has
// stopped, then run it on the shared memory.
func (e *encoder) host(c gpu.Command) error {
	e.commit()
	if last := e.q.last; last != nil {
		select {
		case <-last.ch:
		case <-e.q.stopCh:
			return errClosedf("queue closed before a CPU command ran")
		}
	}
	if s := atomic.LoadUint32(&e.q.slots[e.b.slot]); s != metalshader.StatusRunning {
		return nil // the completer reports the batch's status
	}
	var bufs []gpu.Buffer
	switch c := c.(type) {
	case gpu.Arange:
		bufs = []gpu.Buffer{c.Dst}
	case gpu.Add:
		bufs = []gpu.Buffer{c.Dst, c.A, c.B}
	case gpu.Scale:
		bufs = []gpu.Buffer{c.Dst, c.Src}
	}
	var mem [3][]byte
	for i, b := range bufs {
		_, data, err := e.ref(b)
		if err != nil {
			return err
		}
		mem[i] = data
	}
	hostRun(c, mem[0], mem[1], mem[2])
	return nil
}

// commandBuffer returns the open command buffer, opening one if needed.
func (e *encoder) commandBuffer() metal.CommandBufferObject {
	if e.cb.IsNil() {
		e.cb = e.q.mq.CommandBuffer()
	}
	return e.cb
}

// compute returns the open compute encoder, opening one if needed.
func (e *encoder) compute() metal.ComputeCommandEncoderObject {
	if e.enc.IsNil() {
		e.enc = e.commandBuffer().ComputeCommandEncoder()
	}
	return e.enc
}

// endCompute ends the open compute encoder, if any.
func (e *encoder) endCompute() {
	if !e.enc.IsNil() {
		metal.CommandEncoderObject{Object: e.enc.Object}.EndEncoding()
		e.enc = metal.ComputeCommandEncoderObject{}
	}
}

// commit commits the open command buffer, if any, with a completed
// handler that records its error and closes its cbWait.
func (e *encoder) commit() {
	if e.cb.IsNil() {
		return
	}
	e.endCompute()
	w := &cbWait{ch: make(chan struct{})}
	e.cb.AddCompletedHandler(func(cb metal.CommandBufferObject) {
		if cb.Status() == metal.CommandBufferStatusError {
			objc.WithAutoreleasePool(func() {
				w.err = fmt.Errorf("metal: command buffer failed: %s", nsErrorText(cb.Error()))
			})
		}
		close(w.ch)
	})
	e.cb.Commit()
	e.b.parts = append(e.b.parts, w)
	e.q.last = w
	e.cb = metal.CommandBufferObject{}
}
