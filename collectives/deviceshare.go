package collectives

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/gpu"
)

// What the device-resident path shares between the ranks of a process: the
// handles a rank publishes of its buffers (with shares of their memory for
// the peers' kernels) and what a rank's kernels hold of the buffers their
// peer table names, so that no memory is reused while a kernel may still
// touch it, whatever rank fails or frees first.

// handle is what a rank of this process publishes of one of its buffers
// in a device-resident collective's window: the memory, its device, and a
// share of the memory for every rank's kernels (taken at launch, while the
// array could not yet be freed: a share cannot be taken once its owner has
// let go). Each rank takes one when it fills its table; the publisher gives
// back those not taken when its task ends.
type handle struct {
	mem    *array.Memory
	dev    gpu.Device
	shares atomic.Int32
}

// take takes one of the handle's shares; false when none is left.
func (h *handle) take() bool {
	for {
		n := h.shares.Load()
		if n <= 0 {
			return false
		}
		if h.shares.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// drain gives back the shares no rank took.
func (h *handle) drain() {
	for n := h.shares.Swap(0); n > 0; n-- {
		h.mem.Release()
	}
}

// handles maps the ids exposed in windows to buffers; ids are never reused.
var (
	handles   sync.Map // uint64 -> *handle
	handleSeq atomic.Uint64
)

// newHandle takes n shares of mem for the ranks' kernels; the caller holds
// one already, so none can fail unless the memory was freed before.
func newHandle(mem *array.Memory, dev gpu.Device, n int) (*handle, error) {
	h := &handle{mem: mem, dev: dev}
	for range n {
		if err := mem.Retain(); err != nil {
			h.drain()
			return nil, err
		}
		h.shares.Add(1)
	}
	return h, nil
}

func publish(h *handle) uint64 {
	id := handleSeq.Add(1)
	handles.Store(id, h)
	return id
}

// peerHold is what a rank's kernels hold of the buffers their table names:
// a share of each memory of this process, taken before the table is armed,
// and the aliases of other processes' memory (gpu.IPCDevice imports),
// given back with the table once the kernels have run (or will never run).
type peerHold struct {
	mu      sync.Mutex
	mems    []*array.Memory
	aliases []gpu.Buffer
	table   gpu.PeerTable
	closed  bool
}

// peerEntry is one buffer of a peer table: a handle of this process (h) or
// an alias of another process's memory (alias).
type peerEntry struct {
	h     *handle
	alias gpu.Buffer
}

// handleEntries are the entries of handles hs.
func handleEntries(hs ...*handle) []peerEntry {
	es := make([]peerEntry, len(hs))
	for i, h := range hs {
		es[i].h = h
	}
	return es
}

// fill takes a share of every handle's memory (and over every alias),
// sets the table's entries and arms it; after close it takes nothing and
// reports so (the aliases are then freed at once).
func (h *peerHold) fill(es []peerEntry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range es {
		if e.alias != nil {
			h.aliases = append(h.aliases, e.alias)
		}
	}
	if h.closed {
		h.freeAliases()
		return fmt.Errorf("the kernels already ran: %w", ErrClosed)
	}
	for i, e := range es {
		b := e.alias
		if b == nil {
			if !e.h.take() {
				return fmt.Errorf("peer buffer %d: its rank's task has ended: %w", i, ErrPeerLost)
			}
			h.mems = append(h.mems, e.h.mem)
			b = e.h.mem.Buffer()
		}
		if err := h.table.Set(i, b); err != nil {
			return fmt.Errorf("peer table entry %d: %w", i, err)
		}
	}
	h.table.Arm()
	return nil
}

// freeAliases ends the hold's aliases; h.mu is held.
func (h *peerHold) freeAliases() {
	for _, b := range h.aliases {
		_ = b.Free()
	}
	h.aliases = nil
}

// close gives back the table and every share, once.
func (h *peerHold) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for _, m := range h.mems {
		m.Release()
	}
	h.mems = nil
	_ = h.table.Free()
	h.freeAliases()
}

// newPeerTable makes the call's table: every rank's input, then every
// rank's output. A device whose kernels lack peer tables gives
// gpu.ErrNoBackend, and the call takes the host path.
func (c *call) newPeerTable() error {
	t, err := c.dev.(gpu.PeerDevice).NewPeerTable(2 * c.g.Size())
	if err != nil {
		return err
	}
	c.hold = &peerHold{table: t}
	return nil
}

// newHandles takes the shares of the call's input and output that the
// ranks' kernels will hold (at launch, while the arrays are live).
func (c *call) newHandles() error {
	switch c.p.desc.Kind {
	case algo.KindSend: // one share, for the receiver's kernel
		in, err := newHandle(c.inMem, c.dev, 1)
		c.handles[0] = in
		return err
	case algo.KindRecv: // one share, for this rank's own kernel
		out, err := newHandle(c.outMem, c.dev, 1)
		c.handles[1] = out
		return err
	}
	n := c.g.Size()
	in, err := newHandle(c.inMem, c.dev, n)
	if err != nil {
		return err
	}
	out, err := newHandle(c.outMem, c.dev, n)
	if err != nil {
		in.drain()
		return err
	}
	c.handles = [2]*handle{in, out}
	return nil
}

// drainHandles gives back the shares of the call's handles that no rank
// took (the kernels' table keeps the ones taken).
func (c *call) drainHandles() {
	for _, h := range c.handles {
		if h != nil {
			h.drain()
		}
	}
}

// unpublish withdraws the call's handles and gives back the shares no
// rank took.
func (c *call) unpublish(ids ...uint64) {
	for _, id := range ids {
		handles.Delete(id)
	}
	c.drainHandles()
}
