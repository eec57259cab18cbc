package collectives

import (
	"context"
	"encoding/binary"
	"fmt"
	"weak"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// The device-resident path (DESIGN section 3). One fence per call; each
// side counts its own calls:
//
//	GPU stream: update(1: input ready) wait(2: go) kernels update(3: done) wait(4: every rank done)
//	comm task:  wait(1) [expose, match, fill the peer table] update(2) wait(3) [sync] update(4)
//
// The kernels read the peers' device buffers through a peer table that the
// comm task fills and arms between its wait(1) and update(2); they were
// queued at launch, when the peers' buffers were not yet known. A failure
// releases the GPU waits (R5): an unarmed table makes the kernels write
// nothing, and an armed one keeps every buffer it names retained until the
// kernels have run (peerHold), so no rank's memory is reused while another
// rank's kernel may still read or write it. The last wait keeps the
// rank's later work (which may overwrite its input) behind every peer's
// kernels.

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
		return []gpu.Command{cmd(d.Root, d.Root+1, n+r, n+r+1, 0, 0, d.Count)}
	case algo.KindAllToAll: // equal blocks: rank q's block r lands in block q
		blk := d.Count / n
		cmds := make([]gpu.Command, n)
		for q := range n {
			cmds[q] = cmd(q, q+1, n+r, n+r+1, r*blk, q*blk, blk)
		}
		return cmds
	case algo.KindAllGather:
		cmds := make([]gpu.Command, n)
		for q := range n {
			cmds[q] = cmd(q, q+1, n+r, n+r+1, 0, q*d.Count, d.Count)
		}
		return cmds
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
	if err := c.fin.Wait(ctx); err != nil { // 1: the input is written
		return abort(err)
	}
	if err := p.in.Err(); err != nil { // R11
		return abort(fmt.Errorf("input: %w", err))
	}
	ids := make([]byte, 16)
	in, out := publish(c.handles[0]), publish(c.handles[1])
	defer c.unpublish(in, out) // after the last Sync: every peer has looked them up
	binary.LittleEndian.PutUint64(ids, in)
	binary.LittleEndian.PutUint64(ids[8:], out)
	w, err := c.exposeDevice(ctx, ids)
	if err != nil {
		return abort(err)
	}
	defer w.Leave()
	hs, err := c.peerHandles(w)
	if err != nil {
		return abort(err)
	}
	if err := c.hold.fill(hs); err != nil {
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
	if err := w.Sync(ctx); err != nil { // every rank's kernels ran
		return abort(err)
	}
	return c.fin.Update() // 4: the stream goes on
}

// exposeDevice publishes this rank's signature and buffers in the
// collective's window and matches the ranks' signatures.
func (c *call) exposeDevice(ctx context.Context, ids []byte) (transport.Window, error) {
	pa := c.g.t.(transport.PeerAccess)
	w, err := pa.Expose(ctx, algo.WindowTag(c.p.desc), algo.DeviceSignature(c.p.desc), ids)
	if err != nil {
		return nil, err
	}
	n := c.g.Size()
	sigs := make([][]byte, n)
	for q := range n {
		sigs[q] = w.Buffers(q)[0]
	}
	if err := algo.MatchDevice(c.p.desc, n, sigs); err != nil {
		w.Leave()
		return nil, err
	}
	return w, nil
}

// peerHandles looks up every rank's input and output (rank order: all
// inputs, then all outputs). Every rank sees the same buffers, so a
// buffer on another device fails every rank alike.
func (c *call) peerHandles(w transport.Window) ([]*handle, error) {
	n := c.g.Size()
	hs := make([]*handle, 2*n)
	for q := range n {
		ids := w.Buffers(q)[1]
		if len(ids) != 16 {
			return nil, fmt.Errorf("rank %d exposed %d bytes of buffer ids: %w", q, len(ids), ErrBadArgument)
		}
		for k := range 2 {
			v, ok := handles.Load(binary.LittleEndian.Uint64(ids[8*k:]))
			if !ok {
				return nil, fmt.Errorf("rank %d's buffers are gone: %w", q, ErrPeerLost)
			}
			h := v.(*handle)
			if h.dev != c.dev {
				return nil, fmt.Errorf("rank %d's buffers are on another device: %w", q, ErrBadArgument)
			}
			hs[k*n+q] = h
		}
	}
	return hs, nil
}
