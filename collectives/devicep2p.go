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
	if err := p.in.Err(); err != nil { // a failed input is never used as data
		return abort(fmt.Errorf("input: %w", err))
	}
	id := publish(c.handles[0])
	defer c.unpublish(id) // after done: the receiver has taken its share
	hs := algo.NewDeviceP2P(p.desc, p.tag)
	hello := binary.LittleEndian.AppendUint64(append([]byte(nil), hs.Hello...), id)
	if err := t.Send(ctx, p.desc.Peer, hs.Sig, hello); err != nil {
		return abort(err)
	}
	if err := t.Recv(ctx, p.desc.Peer, hs.Data, make([]byte, 1)); err != nil { // the receiver copied it
		return abort(err)
	}
	return nil
}

// runDeviceRecv is the receiver's comm task.
func (c *call) runDeviceRecv(ctx context.Context) error {
	p, t := c.p, c.g.t
	abort := func(err error) error { t.Abort(p.tag, err); return err }
	hs := algo.NewDeviceP2P(p.desc, p.tag)
	hello := make([]byte, len(hs.Hello)+8)
	if err := t.Recv(ctx, p.desc.Peer, hs.Sig, hello); err != nil {
		if errors.Is(err, transport.ErrSizeMismatch) {
			err = fmt.Errorf("the sender is on another data path: %w: %w", ErrMismatch, err)
		}
		return abort(err)
	}
	if err := hs.Check(hello); err != nil {
		return abort(err)
	}
	v, ok := handles.Load(binary.LittleEndian.Uint64(hello[len(hs.Hello):]))
	if !ok {
		return abort(fmt.Errorf("rank %d's buffer is gone: %w", p.desc.Peer, ErrPeerLost))
	}
	src := v.(*handle)
	if src.dev != c.dev {
		return abort(fmt.Errorf("rank %d's buffer is on another device: %w", p.desc.Peer, ErrBadArgument))
	}
	if err := c.hold.fill(handleEntries(src, c.handles[1])); err != nil {
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
