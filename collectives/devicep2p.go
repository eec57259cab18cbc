package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"weak"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// Send and Recv on the device-resident path: the receiver's kernel copies
// the sender's device buffer into its output. One fence per side:
//
//	sender GPU:    update(1: input ready)
//	sender comm:   wait(1) [hello: signature and handle] [done?]
//	receiver GPU:  wait(1: go) copy update(2: copied)
//	receiver comm: [hello?] [check, fill the table] update(1) wait(2) [done]
//
// As on the host path, the sender's GPU stream does not wait for the
// receiver (a ring of sends then receives on every rank's stream would
// wait for itself): the input must not be written until the Send has
// completed (Group.Wait), and the sender's task, which holds a share of
// it, ends only once the receiver's copy is done. The messages travel on
// the pair's Send/Recv tags (algo.DeviceP2P), so a peer on the host path
// fails at once on their size.

// encodeDeviceSend puts the sender's GPU side on its stream.
func (c *call) encodeDeviceSend() (upd, last streams.Event, err error) {
	if err := c.fin.UpdateGPU(c.s, c.p.in); err != nil {
		return upd, last, err
	}
	return c.s.Last(), last, nil
}

// encodeDeviceRecv puts the receiver's GPU side on its stream.
func (c *call) encodeDeviceRecv() (upd, last streams.Event, err error) {
	f, s := c.fin, c.s
	if _, err := f.WaitGPU(s, weakOutput{weak.Make(c.out)}); err != nil {
		return upd, last, err
	}
	hold := c.hold
	cp := gpu.PeerReduce{Table: hold.table, SrcLo: 0, SrcHi: 1, DstLo: 1, DstHi: 2, N: c.p.desc.Count, DType: c.p.desc.DType, Op: gpu.OpSum}
	if err := f.UpdateGPUAfter(s, nil, []gpu.Command{cp}, func(err error) {
		hold.close()
		if err != nil {
			c.failFences(fmt.Errorf("device copy: %w", err))
		}
	}); err != nil {
		return upd, last, err
	}
	last = s.Last()
	c.out.SetEvent(last)
	return upd, last, nil
}

// runDeviceSend is the sender's comm task.
func (c *call) runDeviceSend(ctx context.Context) error {
	p, t := c.p, c.g.t
	abort := func(err error) error { t.Abort(p.tag, err); return err }
	if err := c.fin.Wait(ctx); err != nil { // 1: the input is written
		return abort(err)
	}
	if err := p.in.Err(); err != nil { // R11
		return abort(fmt.Errorf("input: %w", err))
	}
	offer, withdraw, err := c.offerInput()
	if err != nil {
		return abort(err)
	}
	copied := false
	defer func() { withdraw(copied) }() // after done: the receiver's copy has run
	hs := algo.NewDeviceP2P(p.desc, p.tag)
	hello := append(append([]byte(nil), hs.Hello...), offer...)
	if err := t.Send(ctx, p.desc.Peer, hs.Sig, hello); err != nil {
		return abort(err)
	}
	if err := t.Recv(ctx, p.desc.Peer, hs.Data, make([]byte, 1)); err != nil { // the receiver copied it
		return abort(err)
	}
	copied = true
	return nil
}

// runDeviceRecv is the receiver's comm task.
func (c *call) runDeviceRecv(ctx context.Context) error {
	p, t := c.p, c.g.t
	abort := func(err error) error { t.Abort(p.tag, err); return err }
	hs := algo.NewDeviceP2P(p.desc, p.tag)
	hello := make([]byte, len(hs.Hello)+c.offerLen())
	if err := t.Recv(ctx, p.desc.Peer, hs.Sig, hello); err != nil {
		if errors.Is(err, transport.ErrSizeMismatch) {
			err = fmt.Errorf("the sender is on another data path: %w: %w", ErrMismatch, err)
		}
		return abort(err)
	}
	if err := hs.Check(hello); err != nil {
		return abort(err)
	}
	src, err := c.takeOffer(hello[len(hs.Hello):])
	if err != nil {
		return abort(err)
	}
	if err := c.hold.fill([]peerEntry{src, {h: c.handles[1]}}); err != nil {
		return abort(err)
	}
	if err := c.fin.Update(); err != nil { // 1: go
		return abort(err)
	}
	if err := c.fin.Wait(ctx); err != nil { // 2: copied
		return abort(err)
	}
	if err := c.hold.table.Err(); err != nil {
		return abort(err)
	}
	if err := t.Send(ctx, p.desc.Peer, hs.Data, []byte{1}); err != nil {
		return abort(err)
	}
	return nil
}

// offerLen is the size of a sender's offer of its input: a handle's id in
// process, an IPC descriptor across processes.
func (c *call) offerLen() int {
	if c.g.cfg.processes {
		return ipcOfferLen
	}
	return 8
}

// offerInput makes the sender's offer of its input, and what withdraws it
// when the task ends (copied: the receiver said its copy ran).
func (c *call) offerInput() (offer []byte, withdraw func(copied bool), err error) {
	if c.g.cfg.processes {
		return c.offerInputIPC()
	}
	id := publish(c.handles[0])
	return binary.LittleEndian.AppendUint64(nil, id), func(bool) { c.unpublish(id) }, nil // the receiver holds its own share
}

// takeOffer is the receiver's side: the table entry of the sender's input.
func (c *call) takeOffer(offer []byte) (peerEntry, error) {
	if c.g.cfg.processes {
		return c.takeOfferIPC(offer)
	}
	peer := c.p.desc.Peer
	v, ok := handles.Load(binary.LittleEndian.Uint64(offer))
	if !ok {
		return peerEntry{}, fmt.Errorf("rank %d's buffer is gone: %w", peer, ErrPeerLost)
	}
	src := v.(*handle)
	if src.dev != c.dev {
		return peerEntry{}, fmt.Errorf("rank %d's buffer is on another device: %w", peer, ErrBadArgument)
	}
	return peerEntry{h: src}, nil
}
