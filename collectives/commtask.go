package collectives

import (
	"context"
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/streams"
)

// task is the comm stream's side: per part, wait for the input
// fence, check the input, run the collective on host bytes, raise the
// output fence. Done gives the call's shares back and ends the fences. The
// task holds the input's and the output's memory, never the output array
// itself, so the output can take over a donated input's buffer.
func (c *call) task() streams.Task {
	g, p := c.g, c.p
	start := time.Now()
	return streams.Task{Name: c.label.name, Run: func(ctx context.Context) error {
		c.t0 = g.rec.Now()
		c.hops.sawTask()
		for _, f := range c.fences {
			f.SetTimeout(g.cfg.timeout + time.Second) // the deadline counts from now
		}
		cctx, cancel := context.WithTimeout(ctx, g.cfg.timeout)
		defer cancel()
		if c.device {
			return c.runDevice(cctx)
		}
		if c.engine {
			return c.runEngine(cctx)
		}
		var inB, outB []byte
		if c.inMem != nil {
			inB = c.hostIn.bytes(c.inMem.Buffer(), p.in.NBytes())
		}
		if c.outMem != nil {
			outB = c.hostOut.bytes(c.outMem.Buffer(), sizeOf(p.outShape)*p.outDType.Size())
		}
		for i := range c.parts {
			if err := c.runPart(cctx, i, inB, outB); err != nil {
				return err
			}
		}
		return nil
	}, Done: func(err error) {
		c.releaseShares()
		c.drainHandles() // a task that never ran leaves its peers' shares
		if err != nil {
			err = g.closedErr(g.opError(c.label, err))
			c.failFences(err)
			g.record(err)
		} else {
			for _, f := range c.fences {
				f.Release()
			}
		}
		if g.rec != nil {
			c.traceTask(c.t0, err)
			c.hops.end(c)
		}
		if g.met != nil {
			g.countCall(c.label.name, p.desc.Count*p.desc.DType.Size(), time.Since(start), err)
		}
		if g.cfg.trace != nil {
			var steps []fence.Step
			for _, f := range c.fences {
				steps = append(steps, f.Trace()...)
			}
			g.cfg.trace(TraceEvent{Op: c.label.name, Rank: g.Rank(), Seq: p.desc.Seq, HasEvent: c.hasEvent,
				Steps: steps, Elapsed: time.Since(start), Err: err})
		}
	}}
}

// runPart is part i of the task. A failure before the algorithm runs
// aborts the collective, so the peers fail at once rather than at their
// deadline.
func (c *call) runPart(ctx context.Context, i int, inB, outB []byte) error {
	p, t := c.p, c.g.t
	if c.hasEvent {
		var err error
		if i == 0 { // the first part's wait ends at a peer's disagreement
			err = c.awaitInput(ctx)
		} else {
			err = c.fin.Wait(ctx)
		}
		if err != nil {
			t.Abort(p.tag, err)
			return err
		}
	}
	// An input whose producer failed after launch must not be reduced
	// or sent as if it were data.
	if p.in != nil {
		if err := p.in.Err(); err != nil {
			err = fmt.Errorf("input: %w", err)
			t.Abort(p.tag, err)
			return err
		}
	}
	d, pin, pout := p.desc, inB, outB
	if c.parts > 1 {
		lo, hi := c.span(i, len(inB))
		d.Part, d.Whole, d.Count = uint32(i), d.Count, (hi-lo)/d.DType.Size()
		pin, pout = inB[lo:hi], outB[lo:hi]
	}
	if err := p.run(ctx, d, pin, pout); err != nil {
		return err
	}
	if p.hasOut {
		if err := c.fout.Update(); err != nil {
			// Released under us (the GPU side failed): the peers must not
			// wait for this rank's next part.
			t.Abort(p.tag, err)
			return err
		}
	}
	return nil
}
