package collectives

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/gpu"
)

// The device-resident path between ranks in separate processes that share
// one device: each rank exports its input and output
// (gpu.IPCDevice), sends every peer the handles with its device's id over
// the data plane (algo.MeetDevice, after the match), imports its peers'
// and names the imports in its peer table. The choreography is the
// window's; only the meeting differs.
//
// Measured on one H200 with 2 processes (no MPS), every collective whose
// kernels run in both processes took 1.1 to 1.4 ms whatever its size (64
// MiB all-reduce 47-51 GB/s busbw, a quarter of the floor), while one
// whose kernel runs in one process only (a 1-element all-reduce: the other
// rank's block is empty) took 78-137 us; under MPS (the processes' work in
// one context) 0.3-0.5 ms and 125 GB/s. Running the kernels on a side
// queue submitted after the meeting instead of queueing them on the rank's
// stream behind a fence wait changed nothing (1.2-1.4 ms), so the cost is
// the GPU switching between the processes' contexts, not the waits; one
// process per GPU (the in-process path) or MPS avoids it.
//
// A rank's memory must not be reused while a peer's kernel may still
// touch it. In process, every kernel holds a share of the memory it reads;
// across processes a rank keeps its own shares until every rank has said
// its kernels ran (the meeting's sync). A call that fails after its
// handles went out cannot know whether a peer's kernels have run (a peer
// that armed its table before the failure runs them at once), so it keeps
// its memory from reuse for ipcQuarantine before giving it back: far
// longer than a kernel over any buffer takes, and short enough that a
// failing loop does not pin memory for long. A peer's process that dies
// takes its kernels with it.
const ipcQuarantine = 10 * time.Second

// ipcDescLen is the size of a rank's descriptor: whether its buffers can
// be shared (1 byte), its device's id (16), its input's and its output's
// handles.
const ipcDescLen = 1 + 16 + 2*gpu.IPCHandleSize

// ipcMeeting is the meeting of ranks in separate processes.
type ipcMeeting struct {
	c      *call
	es     []peerEntry
	synced bool
}

func (c *call) meetOverIPC(ctx context.Context) (_ meeting, err error) {
	m := &ipcMeeting{c: c}
	defer func() {
		if err != nil { // no table will name the imports
			m.freeAliases()
			m.leave()
		}
	}()
	dev := c.dev.(gpu.IPCDevice) // devicePath checked it
	mine, why := c.ipcDescriptor(dev)
	n, r := c.g.Size(), c.g.Rank()
	all := make([][]byte, n)
	if err := algo.MeetDevice(ctx, c.g.t, c.p.desc, mine, all); err != nil {
		return nil, err
	}
	// Every rank sees every descriptor, so the checks below fail every
	// rank alike.
	for q, d := range all {
		switch {
		case q == r && d[0] == 0:
			return nil, fmt.Errorf("this rank's buffers cannot be shared with other processes: %w", why)
		case d[0] == 0:
			return nil, fmt.Errorf("rank %d's buffers cannot be shared with other processes: %w", q, ErrBadArgument)
		case !bytes.Equal(d[1:17], all[0][1:17]):
			return nil, fmt.Errorf("rank %d's buffers are on another device than rank 0's (ranks in separate processes share device memory only on one device): %w", q, ErrBadArgument)
		}
	}
	m.es = make([]peerEntry, 2*n)
	for k := range 2 {
		for q := range n {
			e := &m.es[k*n+q]
			if q == r {
				e.h = c.handles[k]
				continue
			}
			off := 17 + k*gpu.IPCHandleSize
			h, err := gpu.DecodeIPCHandle(all[q][off : off+gpu.IPCHandleSize])
			if err == nil {
				e.alias, err = dev.Import(h)
			}
			if err != nil {
				return nil, fmt.Errorf("rank %d's %s: %w", q, [2]string{"input", "output"}[k], err)
			}
		}
	}
	return m, nil
}

// ipcDescriptor is this rank's descriptor; one whose buffers cannot be
// shared says so (and why, for this rank's error).
func (c *call) ipcDescriptor(dev gpu.IPCDevice) ([]byte, error) {
	d := make([]byte, ipcDescLen)
	id := dev.ID()
	copy(d[1:], id[:])
	for k, h := range c.handles {
		x, err := dev.Export(h.mem.Buffer())
		if err != nil {
			clear(d)
			return d, fmt.Errorf("%s: %w", [2]string{"input", "output"}[k], err)
		}
		copy(d[17+k*gpu.IPCHandleSize:], x.Encode())
	}
	d[0] = 1
	return d, nil
}

// freeAliases frees the imports of a meeting whose table was never filled.
func (m *ipcMeeting) freeAliases() {
	for _, e := range m.es {
		if e.alias != nil {
			_ = e.alias.Free()
		}
	}
}

func (m *ipcMeeting) entries() []peerEntry { return m.es }

func (m *ipcMeeting) sync(ctx context.Context) error {
	err := algo.SyncDevice(ctx, m.c.g.t, m.c.p.desc)
	m.synced = err == nil
	return err
}

// leave gives back the shares of this rank's buffers that the peers'
// kernels needed: at once after the sync, after ipcQuarantine otherwise.
func (m *ipcMeeting) leave() {
	if m.synced {
		m.c.drainHandles()
		return
	}
	time.AfterFunc(ipcQuarantine, m.c.drainHandles)
}
