package collectives

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// P2P is one point-to-point operation of a Batch, made by SendOp or RecvOp.
// Its zero value is not an operation.
type P2P struct {
	send  bool
	x     *array.Array
	peer  int
	shape []int
	dtype gpu.DType
}

// SendOp is a Send of x to rank dst within a Batch.
func SendOp(x *array.Array, dst int) P2P { return P2P{send: true, x: x, peer: dst} }

// RecvOp is a Recv of an array of the given shape and dtype from rank src
// within a Batch.
func RecvOp(shape []int, dt gpu.DType, src int) P2P {
	return P2P{peer: src, shape: slices.Clone(shape), dtype: dt}
}

// Batch starts ops together and returns, at once, one array per op in
// order: the array a RecvOp receives into, nil for a SendOp. It is NCCL's
// group call and torch's batch_isend_irecv: on the GPU stream every send's
// input is made ready before any receive's output is waited for, and the
// communication stream runs the ops concurrently, so a ring or a pipeline
// schedule cannot deadlock on the order of its calls (one Send and one
// Recv each way, issued alone, would wait for each other). The ops
// complete independently: a received array is ready once its bytes have
// arrived, and a failure fails only the ops it touches (their arrays, and
// Wait for a send's).
//
// The ops match their peers' as separate Send and Recv calls do: the k-th
// send from a to b, alone or in a batch, meets the k-th receive on b from
// a. A batch with an op this rank can tell is wrong (a peer out of range,
// a nil input, a bad shape) is refused whole: every op still takes its
// place in its pair's order and fails there, so the peers' matching ops
// fail at once instead of waiting.
func (g *Group) Batch(s *streams.GPU, ops ...P2P) ([]*array.Array, error) {
	plans := make([]plan, len(ops))
	for i, op := range ops {
		if op.send {
			plans[i] = g.sendPlan(s, op.x, op.peer)
		} else {
			plans[i] = g.recvPlan(s, op.shape, op.dtype, op.peer)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, fmt.Errorf("collectives: batch rank %d: %w", g.Rank(), ErrClosed)
	}
	for i := range plans {
		if err := g.checkPeer(fmt.Sprintf("batch op %d", i), plans[i]); err != nil {
			return nil, err // no op has a place yet: nothing to abort
		}
	}
	for i := range plans {
		g.number(&plans[i])
	}
	err := g.refusal(plans)
	if err != nil {
		return nil, g.abortAll(plans, err)
	}
	calls, err := g.prepareAll(plans)
	if err != nil {
		return nil, g.abortAll(plans, err)
	}
	if err := g.startAll(calls); err != nil {
		for _, c := range calls {
			c.fail(err)
		}
		return nil, g.abortAll(plans, err)
	}
	outs := make([]*array.Array, len(calls))
	for i, c := range calls {
		outs[i] = c.out
	}
	return outs, nil
}

// refusal is why a batch cannot run, or nil: the first op refused or
// rejected by check.
func (g *Group) refusal(plans []plan) error {
	for i := range plans {
		p := &plans[i]
		if p.refused != nil {
			return fmt.Errorf("collectives: batch rank %d: op %d: %w", g.Rank(), i, p.refused)
		}
		if _, err := g.check(p.desc.Kind.String(), p); err != nil {
			return fmt.Errorf("collectives: batch rank %d: op %d: %w", g.Rank(), i, err)
		}
	}
	return nil
}

// abortAll aborts every op of a batch that cannot run, so the peers' ops
// fail at once, and returns err.
func (g *Group) abortAll(plans []plan, err error) error {
	for _, p := range plans {
		g.t.Abort(p.tag, err)
	}
	return err
}

// prepareAll prepares every op's call; on a failure it fails those made.
func (g *Group) prepareAll(plans []plan) ([]*call, error) {
	calls := make([]*call, 0, len(plans))
	for _, p := range plans {
		c, err := g.prepare(p.desc.Kind.String(), p)
		if err != nil {
			for _, c := range calls {
				c.fail(err)
			}
			return nil, err
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// startAll enqueues the GPU sides, sends' input updates before receives'
// output waits, then submits one comm task that runs every op at once.
func (g *Group) startAll(calls []*call) error {
	for _, sends := range []bool{true, false} {
		for _, c := range calls {
			if (c.p.desc.Kind == algo.KindSend) == sends {
				if err := c.enqueue(); err != nil {
					return err
				}
			}
		}
	}
	tasks := make([]streams.Task, len(calls))
	for i, c := range calls {
		tasks[i] = c.task()
	}
	return g.comm.Submit(together(tasks))
}

// together is one comm task that runs tasks concurrently; each task's
// Done is called once, as soon as its Run has returned (a panic in it
// becomes an error wrapping streams.ErrPanic), or with the stream's error
// for every task if the whole never ran.
func together(tasks []streams.Task) streams.Task {
	once := make([]sync.Once, len(tasks))
	finish := func(i int, err error) {
		once[i].Do(func() {
			if tasks[i].Done != nil {
				tasks[i].Done(err)
			}
		})
	}
	return streams.Task{Name: "batch", Run: func(ctx context.Context) error {
		var wg sync.WaitGroup
		for i := range tasks {
			wg.Go(func() { finish(i, runGuarded(ctx, tasks[i])) })
		}
		wg.Wait()
		return nil
	}, Done: func(err error) {
		if err == nil {
			err = errors.New("batch ended before its ops") // never: Run finishes every op
		}
		for i := range tasks {
			finish(i, err)
		}
	}}
}

// runGuarded runs t, turning a panic into an error.
func runGuarded(ctx context.Context, t streams.Task) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("task %s: %w: %v", t.Name, streams.ErrPanic, r)
		}
	}()
	return t.Run(ctx)
}
