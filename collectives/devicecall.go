package collectives

import (
	"context"
	"fmt"
	"weak"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// The device-resident path: kernels on each rank's GPU stream read the
// peers' device buffers directly. One fence per call; each side counts its
// own calls:
//
//	GPU stream: update(1: input ready) wait(2: go) kernels update(3: done) wait(4: every rank done)
//	comm task:  wait(1) [expose, match, fill the peer table] update(2) wait(3) [sync] update(4)
//
// The kernels read the peers' device buffers through a peer table that the
// comm task fills and arms between its wait(1) and update(2); they were
// queued at launch, when the peers' buffers were not yet known. A failure
// releases the GPU waits (every wait passes): an unarmed table makes the
// kernels write nothing, and an armed one keeps every buffer it names
// retained until the kernels have run (peerHold), so no rank's memory is
// reused while another rank's kernel may still read or write it. The last
// wait keeps the rank's later work (which may overwrite its input) behind
// every peer's kernels.

// releaseHold gives back the peer table and the handles' shares of a call
// that failed before its task ran (its table was never armed, so its
// kernels write nothing).
func (c *call) releaseHold() {
	if c.hold != nil {
		c.hold.close()
	}
	c.drainHandles()
}

// encodeDevice puts the device-resident GPU side on the stream; it returns
// the events of the input update and of the last wait, for the ledger.
func (c *call) encodeDevice() (upd, last streams.Event, err error) {
	switch c.p.desc.Kind {
	case algo.KindSend:
		return c.encodeDeviceSend()
	case algo.KindRecv:
		return c.encodeDeviceRecv()
	}
	f, s := c.fin, c.s
	if err := f.UpdateGPU(s, c.p.in); err != nil {
		return upd, last, err
	}
	upd = s.Last()
	if _, err := f.WaitGPU(s, weakOutput{weak.Make(c.out)}); err != nil {
		return upd, last, err
	}
	hold := c.hold
	if err := f.UpdateGPUAfter(s, nil, c.deviceKernels(), func(err error) {
		hold.close()
		if err != nil {
			c.failFences(fmt.Errorf("device kernels: %w", err))
		}
	}); err != nil {
		return upd, last, err
	}
	if last, err = f.WaitGPU(s, nil); err != nil {
		return upd, last, err
	}
	c.out.SetEvent(last)
	return upd, last, nil
}

// deviceKernels are the call's kernels: PeerReduce commands over the
// table (entries [0,n) inputs, [n,2n) outputs).
func (c *call) deviceKernels() []gpu.Command {
	d, n, r := c.p.desc, c.g.Size(), c.g.Rank()
	cmd := func(srcLo, srcHi, dstLo, dstHi, srcOff, dstOff, cnt int) gpu.Command {
		return gpu.PeerReduce{Table: c.hold.table, SrcLo: srcLo, SrcHi: srcHi, DstLo: dstLo, DstHi: dstHi,
			SrcOff: srcOff, DstOff: dstOff, N: cnt, DType: d.DType, Op: gpu.ReduceOp(d.Op)}
	}
	lo, hi := algo.BlockRange(d.Count, n, r)
	switch d.Kind {
	case algo.KindAllReduce:
		// Partitioned push, whatever the size: rank r reduces its block of
		// every input into every output, so each element is reduced once
		// (bitwise the same on every rank) and each input byte read once.
		// It is the one plan that is right for ranks that differ in
		// donation (in place is safe: a block is read and written by its
		// owner only), so no rank's choice depends on another's.
		return []gpu.Command{cmd(0, n, n, 2*n, lo, lo, hi-lo)}
	case algo.KindReduceScatter:
		return []gpu.Command{cmd(0, n, n+r, n+r+1, lo, 0, hi-lo)}
	case algo.KindBroadcast:
		// Pushed, as the all-reduce: rank r copies its block of the root's
		// input into every output, so the root's input is read once.
		return []gpu.Command{cmd(d.Root, d.Root+1, n, 2*n, lo, lo, hi-lo)}
	case algo.KindAllToAll: // equal blocks: rank q's block r lands in block q
		blk := d.Count / n
		cmds := make([]gpu.Command, n)
		for q := range n {
			cmds[q] = cmd(q, q+1, n+r, n+r+1, r*blk, q*blk, blk)
		}
		return cmds
	case algo.KindAllGather:
		// Pushed: rank r reads its input once and writes it into block r
		// of every output.
		return []gpu.Command{cmd(r, r+1, n, 2*n, 0, r*d.Count, d.Count)}
	}
	return nil
}

// runDevice is the comm task of a device-resident call.
func (c *call) runDevice(ctx context.Context) error {
	switch c.p.desc.Kind {
	case algo.KindSend:
		return c.runDeviceSend(ctx)
	case algo.KindRecv:
		return c.runDeviceRecv(ctx)
	}
	p, t := c.p, c.g.t
	abort := func(err error) error {
		if !algo.Agreed(err) {
			t.Abort(p.tag, err)
		}
		return err
	}
	if err := c.awaitInput(ctx); err != nil { // 1: the input is written
		return abort(err)
	}
	if err := p.in.Err(); err != nil { // a failed input is never used as data
		return abort(fmt.Errorf("input: %w", err))
	}
	m, err := c.meet(ctx)
	if err != nil {
		return abort(err)
	}
	defer m.leave()
	if err := c.hold.fill(m.entries()); err != nil {
		return abort(err)
	}
	if err := c.fin.Update(); err != nil { // 2: go
		return abort(err)
	}
	if err := c.fin.Wait(ctx); err != nil { // 3: this rank's kernels ran
		return abort(err)
	}
	if err := c.hold.table.Err(); err != nil {
		return abort(err)
	}
	if err := m.sync(ctx); err != nil { // every rank's kernels ran
		return abort(err)
	}
	return c.fin.Update() // 4: the stream goes on
}
