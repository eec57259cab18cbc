package collectives

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/transport"
)

// meeting is how the ranks of a device-resident collective learn each
// other's buffers and meet again once their kernels ran: in a PeerAccess
// window (ranks of this process, below) or over messages with IPC handles
// (ranks in separate processes, deviceipc.go). entries are the peer
// table's: every rank's input, then every rank's output (rank order).
// sync returns once every rank's kernels ran. leave ends this rank's part,
// once, after which its buffers may be reused.
type meeting interface {
	entries() []peerEntry
	sync(ctx context.Context) error
	leave()
}

// meet starts the call's meeting, the kind its group's ranks need.
func (c *call) meet(ctx context.Context) (meeting, error) {
	if c.g.cfg.processes {
		return c.meetOverIPC(ctx)
	}
	return c.meetInWindow(ctx)
}

// windowMeeting is the meeting of ranks in this process: each publishes
// its buffers' handles and exposes their ids in the collective's window.
type windowMeeting struct {
	c       *call
	w       transport.Window
	ids     [2]uint64
	handles []*handle
}

func (c *call) meetInWindow(ctx context.Context) (meeting, error) {
	m := &windowMeeting{c: c, ids: [2]uint64{publish(c.handles[0]), publish(c.handles[1])}}
	ids := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, m.ids[0]), m.ids[1])
	w, err := c.exposeDevice(ctx, ids)
	if err != nil {
		c.unpublish(m.ids[:]...)
		return nil, err
	}
	m.w = w
	if m.handles, err = c.peerHandles(w); err != nil {
		m.leave()
		return nil, err
	}
	return m, nil
}

func (m *windowMeeting) entries() []peerEntry           { return handleEntries(m.handles...) }
func (m *windowMeeting) sync(ctx context.Context) error { return m.w.Sync(ctx) }

// leave leaves the window (after the last Sync every peer has looked the
// handles up), then withdraws them.
func (m *windowMeeting) leave() {
	m.w.Leave()
	m.c.unpublish(m.ids[:]...)
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
