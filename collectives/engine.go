package collectives

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"weak"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// The engine path (DataPathNCCL): a vendor library (gpu.Engine: NCCL under
// CUDA) moves the bytes on the device, inside the choreography like any
// transport. One fence per call:
//
//	GPU stream: update(1: input ready) wait(2: output written)
//	comm task:  wait(1) [match] [the engine's collective on its own stream, synced] update(2)
//
// The engine's stream starts the collective after the comm task saw the
// input ready and the task raises the output fence only once the engine's
// stream has run it, so the engine reads a written input and no command
// of the rank's stream touches the output before it is whole. A failure
// (a mismatch, a timeout, the engine's own error, a peer lost or the
// collective aborted, which the comm task watches for on the transport
// while the engine works) releases the GPU wait like any other; one
// the engine may still be working on aborts the engine, whose kernels then
// end, and the group's later engine calls fail with that error.

// groupEngine is a group's engine, made by its first engine collective
// (every rank makes the same first one) and closed with the group.
type groupEngine struct {
	mu  sync.Mutex
	eng gpu.Engine
	err error // why the group has no engine (sticky)
}

// engineIDSize is the size of an engine id (NCCL's unique id).
const engineIDSize = 128

// make makes the group's engine under collective d's tag, unless it is
// made (or failed) already. It runs at the launch of the group's first
// engine collective, before its GPU side holds the stream (see
// gpu.EngineDevice: an engine's making may wait for the device's
// streams), and waits for every rank's launch of it, up to the group's
// timeout.
func (ge *groupEngine) make(ctx context.Context, g *Group, dev gpu.EngineDevice, d algo.Desc) error {
	ge.mu.Lock()
	defer ge.mu.Unlock()
	if ge.eng != nil || ge.err != nil {
		return ge.err
	}
	var id []byte
	var why error
	if g.Rank() == 0 {
		id, why = dev.NewEngineID()
	}
	id, err := algo.ShareEngineID(ctx, g.t, d, id, why, engineIDSize)
	if err == nil {
		ge.eng, err = dev.NewEngine(ctx, id, g.Size(), g.Rank())
	}
	if err != nil {
		ge.err = fmt.Errorf("engine: %w", timedOut(ctx, "the ranks did not all make the engine", err))
	}
	return ge.err
}

// timedOut marks err, which ended a wait bounded by ctx, as a timeout when
// ctx's deadline passed.
func timedOut(ctx context.Context, what string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, ErrTimeout) {
		return fmt.Errorf("%s in time: %w: %w", what, ErrTimeout, err)
	}
	return err
}

// get returns the group's engine, or why it has none.
func (ge *groupEngine) get() (gpu.Engine, error) {
	ge.mu.Lock()
	defer ge.mu.Unlock()
	if ge.eng == nil && ge.err == nil {
		return nil, fmt.Errorf("engine: not made: %w", ErrClosed)
	}
	return ge.eng, ge.err
}

// fail aborts the engine after a failure it may still be working on; the
// group's later engine calls fail with err.
func (ge *groupEngine) fail(err error) {
	ge.mu.Lock()
	defer ge.mu.Unlock()
	if ge.eng != nil {
		_ = ge.eng.Abort()
	}
	if ge.err == nil {
		ge.err = fmt.Errorf("engine aborted after an earlier failure: %w", err)
	}
}

// close ends the engine with the group.
func (ge *groupEngine) close() {
	ge.mu.Lock()
	defer ge.mu.Unlock()
	if ge.eng != nil {
		_ = ge.eng.Close()
	}
	if ge.err == nil {
		ge.err = fmt.Errorf("engine: group closed: %w", ErrClosed)
	}
}

// enginePath reports whether plan p runs on the engine path: the group
// asks for it, its ranks are in separate processes (an engine such as
// NCCL wants a device per rank), the op is a collective with an engine
// plan, and the device has an engine that handles the element type.
func (g *Group) enginePath(p plan) bool {
	if g.cfg.datapath != DataPathNCCL || !g.cfg.processes || p.in == nil || !p.hasOut {
		return false
	}
	d := p.desc
	switch d.Kind {
	case algo.KindAllReduce:
		if !d.Op.Valid() {
			return false // the host path's match refuses it on every rank
		}
	case algo.KindReduceScatter:
		if !d.Op.Valid() || d.Count%g.Size() != 0 {
			return false // uneven blocks: the engine's blocks are equal
		}
	case algo.KindBroadcast:
		if d.Root < 0 || d.Root >= g.Size() {
			return false
		}
	case algo.KindAllGather:
	default:
		return false
	}
	ed, ok := p.s.Device().(gpu.EngineDevice)
	return ok && ed.EngineSupports(d.DType)
}

// encodeEngine puts the engine path's GPU side on the stream.
func (c *call) encodeEngine() (upd, last streams.Event, err error) {
	f, s := c.fin, c.s
	if err := f.UpdateGPU(s, c.p.in); err != nil {
		return upd, last, err
	}
	upd = s.Last()
	if last, err = f.WaitGPU(s, weakOutput{weak.Make(c.out)}); err != nil {
		return upd, last, err
	}
	c.out.SetEvent(last)
	return upd, last, nil
}

// runEngine is the comm task of an engine call.
func (c *call) runEngine(ctx context.Context) error {
	p, g := c.p, c.g
	abort := func(err error) error {
		if !algo.Agreed(err) {
			g.t.Abort(p.tag, err)
		}
		return err
	}
	if err := c.fin.Wait(ctx); err != nil { // 1: the input is written
		return abort(err)
	}
	if err := p.in.Err(); err != nil { // a failed input is never used as data
		return abort(fmt.Errorf("input: %w", err))
	}
	if err := algo.MatchEngine(ctx, g.t, p.desc); err != nil {
		return abort(err)
	}
	eng, err := g.engine.get()
	if err != nil {
		return abort(err)
	}
	d, in, out := p.desc, c.inMem.Buffer(), c.outMem.Buffer()
	op := gpu.ReduceOp(d.Op)
	switch d.Kind {
	case algo.KindAllReduce:
		err = eng.AllReduce(in, out, d.Count, d.DType, op)
	case algo.KindAllGather:
		err = eng.AllGather(in, out, d.Count, d.DType)
	case algo.KindReduceScatter:
		err = eng.ReduceScatter(in, out, d.Count/g.Size(), d.DType, op)
	case algo.KindBroadcast:
		err = eng.Broadcast(in, out, d.Count, d.DType, d.Root)
	}
	if err == nil {
		// The engine's kernels do not hear the transport: a peer lost or an
		// abort ends the wait through the watch, a deadline through ctx.
		wctx, stop := algo.WatchPeers(ctx, g.t, d)
		err = eng.Sync(wctx)
		if cause := context.Cause(wctx); err != nil && ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
			err = fmt.Errorf("%w (the engine stopped waiting: %w)", cause, err)
		}
		stop()
	}
	if err != nil {
		err = timedOut(ctx, "the engine's collective did not finish", err)
		g.engine.fail(err)
		return abort(err)
	}
	return c.fin.Update() // 2: the output is written
}
