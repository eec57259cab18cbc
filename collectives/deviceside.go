package collectives

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"weak"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// The device path across processes (deviceipc.go) runs its kernels on a
// side queue of the group's, submitted by the comm task once the peers'
// buffers are known, instead of queueing them at launch on the rank's GPU
// stream behind a fence wait. Processes sharing a GPU without MPS each
// have a context of their own, and the GPU runs one context's kernels at a
// time: a kernel queued behind a wait on one rank's stream waited for the
// other rank's context to give up its turn. Measured on the H200, 2
// processes, with the kernels on the ranks' streams: every collective took
// 1.0 to 1.7 ms whatever its size (64 MiB all-reduce 47 GB/s busbw); with
// MPS (one context) 0.3 to 0.5 ms. One fence per call:
//
//	GPU stream: update(1: input ready) wait(2: every rank's kernels ran)
//	comm task:  wait(1) [meet, fill the table] [kernels on the side queue] [sync] update(2)
//
// The rank's stream does nothing while the kernels run, so its later
// work (which may overwrite the input) still waits for every peer's
// kernels, as on the in-process path.

// sideQueues are a group's side queues, one per device, closed with the
// group.
type sideQueues struct {
	mu     sync.Mutex
	qs     map[gpu.Device]gpu.Queue
	closed bool
}

func (sq *sideQueues) get(dev gpu.Device) (gpu.Queue, error) {
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if sq.closed {
		return nil, fmt.Errorf("side queue: %w", ErrClosed)
	}
	if q := sq.qs[dev]; q != nil {
		return q, nil
	}
	q, err := dev.NewQueue()
	if err != nil {
		return nil, fmt.Errorf("side queue: %w", err)
	}
	if sq.qs == nil {
		sq.qs = map[gpu.Device]gpu.Queue{}
	}
	sq.qs[dev] = q
	return q, nil
}

// close closes the queues, each bounded by timeout.
func (sq *sideQueues) close(timeout time.Duration) error {
	sq.mu.Lock()
	qs := sq.qs
	sq.qs, sq.closed = nil, true
	sq.mu.Unlock()
	var errs []error
	for _, q := range qs {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		errs = append(errs, q.Close(ctx))
		cancel()
	}
	return errors.Join(errs...)
}

// aside reports whether the call's kernels run on the side queue.
func (c *call) aside() bool { return c.g.cfg.processes }

// encodeDeviceAside puts the GPU side of a call whose kernels run aside on
// its stream.
func (c *call) encodeDeviceAside() (upd, last streams.Event, err error) {
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

// runKernelsAside submits the call's kernels (its table filled and armed)
// to the side queue and waits for them, bounded by ctx; the table and its
// shares go back when they have run, whenever that is.
func (c *call) runKernelsAside(ctx context.Context) error {
	hold := c.hold
	q, err := c.g.side.get(c.dev)
	if err != nil {
		hold.close()
		return err
	}
	done := make(chan error, 1)
	if err := q.Submit(c.deviceKernels(), func(err error) {
		if err == nil {
			err = hold.table.Err()
		}
		hold.close()
		done <- err
	}); err != nil {
		hold.close()
		return fmt.Errorf("device kernels: %w", err)
	}
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("device kernels: %w", err)
		}
		return nil
	case <-ctx.Done():
		return timedOut(ctx, "the device kernels did not finish", ctx.Err())
	}
}
