package collectives

import (
	"context"
	"fmt"
	"weak"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// plan is one collective call, ready to be put on the streams.
type plan struct {
	desc     algo.Desc
	tag      transport.Tag // the whole collective, for Abort
	s        *streams.GPU
	in       *array.Array // nil for Recv
	outShape []int        // the output's shape; [] is a scalar
	hasOut   bool         // false for Send: no output
	// refused, if set, is why the call cannot run: it still takes its
	// place in the call order (so later calls stay matched) and aborts it
	// there, so the peers fail at once.
	refused  error
	outDType gpu.DType
	donate   bool
	p2p      bool // sequence numbers per peer pair, not per group
	even     bool // an all-to-all of equal blocks (the device path runs it)
	// run is the collective itself, on host bytes; out is nil for Send.
	run func(ctx context.Context, d algo.Desc, in, out []byte) error
}

// weakOutput is what the fence guards: a weak pointer, so that neither the
// fence nor the comm task keeps the output alive, and the output can take
// over a donated input's buffer.
type weakOutput struct{ p weak.Pointer[array.Array] }

// Fail implements fence.Guarded.
func (w weakOutput) Fail(err error) {
	if a := w.p.Value(); a != nil {
		a.Fail(err)
	}
}

// launch puts a plan on the GPU stream and the rank's comm stream and
// returns the output at once. A call that fails here still takes its
// sequence number (per group, or per peer pair for send/recv) and aborts
// that collective for the peers, so that they fail at once and later calls
// stay matched.
func (g *Group) launch(p plan) (*array.Array, error) {
	name := p.desc.Kind.String()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, fmt.Errorf("collectives: %s rank %d: %w", name, g.Rank(), ErrClosed)
	}
	if err := g.checkPeer(name, p); err != nil {
		return nil, err
	}
	g.number(&p)
	tag := p.tag // what an early failure aborts
	if !p.p2p {
		g.board.arrive(g.Rank(), p.desc.Seq)
	}
	if p.refused != nil {
		g.t.Abort(tag, p.refused)
		return nil, p.refused
	}
	out, err := g.check(name, &p)
	if err == nil {
		out, err = g.choreograph(name, p)
	}
	if err != nil {
		g.t.Abort(tag, err) // the peers are in this collective too
	}
	return out, err
}

// checkPeer refuses a point-to-point call whose peer is out of range or
// this rank: it has no pair to take a place in.
func (g *Group) checkPeer(name string, p plan) error {
	if p.p2p && (p.desc.Peer < 0 || p.desc.Peer >= g.Size() || p.desc.Peer == g.Rank()) {
		return fmt.Errorf("collectives: %s rank %d: peer %d in a group of %d: %w",
			name, g.Rank(), p.desc.Peer, g.Size(), ErrBadPeer)
	}
	return nil
}

// number gives a call its place in the call order (under g.mu): the
// group's next sequence number, or for send/recv the pair's, and the tag
// that an early failure aborts.
func (g *Group) number(p *plan) {
	p.desc.Group = g.id
	switch {
	case !p.p2p:
		g.seq++
		p.desc.Seq = g.seq
		p.tag = algoTag(g.id, p.desc.Seq)
	case p.desc.Kind == algo.KindSend:
		g.sendSeq[p.desc.Peer]++
		p.desc.Seq = g.sendSeq[p.desc.Peer]
		p.tag = algo.P2PTag(g.id, g.Rank(), p.desc.Peer, p.desc.Seq)
	default:
		g.recvSeq[p.desc.Peer]++
		p.desc.Seq = g.recvSeq[p.desc.Peer]
		p.tag = algo.P2PTag(g.id, p.desc.Peer, g.Rank(), p.desc.Seq)
	}
}

// check rejects what this rank can tell is wrong by itself. Errors about
// the group as a whole (an unknown op, a root out of range, shapes that
// differ across ranks) are found by the algorithms on every rank, so every
// rank fails with a clear error.
func (g *Group) check(name string, p *plan) (*array.Array, error) {
	if p.s == nil {
		return nil, fmt.Errorf("collectives: %s rank %d: nil stream: %w", name, g.Rank(), ErrBadArgument)
	}
	if p.in != nil {
		if err := p.in.Err(); err != nil {
			return nil, fmt.Errorf("collectives: %s rank %d: input: %w", name, g.Rank(), err)
		}
		if p.in.Stream() != nil && p.in.Stream().Device() != p.s.Device() {
			return nil, fmt.Errorf("collectives: %s rank %d: input lives on another device: %w", name, g.Rank(), ErrBadArgument)
		}
		if p.in.Memory().Freed() {
			return nil, fmt.Errorf("collectives: %s rank %d: input: %w", name, g.Rank(), ErrFreed)
		}
		if ev := p.in.Event(); ev.Valid() && ev.Stream() != p.s && !ev.Done() {
			return nil, fmt.Errorf("collectives: %s rank %d: input is produced on %s, not %s, and not complete; wait for it first: %w",
				name, g.Rank(), ev.Stream().Name(), p.s.Name(), ErrCrossStream)
		}
	}
	nb := p.desc.Count * p.desc.DType.Size()
	if g.cfg.maxBytes > 0 && nb > g.cfg.maxBytes {
		return nil, fmt.Errorf("collectives: %s rank %d: %d bytes, limit %d: %w", name, g.Rank(), nb, g.cfg.maxBytes, ErrTooLarge)
	}
	return nil, nil
}

// choreograph puts the call on the streams: first everything that can fail
// without touching a stream (memory, output, staging, fences, the ledger's
// check), then the GPU side, then the comm task. Where the CPU cannot see
// device memory, the input is staged into pinned host memory and the
// output copied back, both on the GPU stream, ordered by the fences, so
// the comm task only ever touches host memory.
//
// A large all-reduce runs as a pipeline of parts (see pipelineParts): the
// GPU stream copies part after part into host memory, raising the input
// fence after each; the task reduces each part as soon as it has landed
// and raises the output fence, whose waits hold back each part's copy
// back. The two directions need a fence each: a fence's two sides take
// turns in the same order, and here the GPU side updates all parts before
// it waits for the first. A single part uses one fence for both.
func (g *Group) choreograph(name string, p plan) (*array.Array, error) {
	c, err := g.prepare(name, p)
	if err != nil {
		return nil, err
	}
	c.postSig() // the early match: before anything can wait (earlymatch.go)
	if c.engine {
		ctx, cancel := context.WithTimeout(context.Background(), g.cfg.timeout)
		err := g.engine.make(ctx, g, c.dev.(gpu.EngineDevice), p.desc)
		cancel()
		if err != nil {
			return c.fail(err)
		}
	}
	if err := c.enqueue(); err != nil {
		return c.fail(err)
	}
	if err := g.comm.Submit(c.task()); err != nil {
		return c.fail(err)
	}
	return c.out, nil
}

// prepare makes a call of p and everything it needs that can fail without
// touching a stream: memory, output, staging, fences.
func (g *Group) prepare(name string, p plan) (*call, error) {
	c := &call{g: g, p: p, label: opLabel{name, g.id, g.Rank(), p.desc.Seq}, s: p.s, dev: p.s.Device(),
		parts: pipelineParts(p)}
	c.staged = !c.dev.Properties().HostVisibleDeviceMem
	c.hasEvent = p.in != nil && (c.staged || !p.in.Ready() || p.donate)
	if g.devicePath(p) && (p.desc.Kind == algo.KindSend || c.newPeerTable() == nil) { // else (no peer kernels): the host path
		c.device, c.staged, c.hasEvent, c.parts = true, false, p.in != nil, 1
	} else if g.enginePath(p) {
		c.engine, c.staged, c.hasEvent, c.parts = true, false, true, 1
	}
	c.hops = c.newHandoffs()
	if err := c.allocate(); err != nil {
		c.releaseHold()
		c.releaseShares()
		return nil, fmt.Errorf("collectives: %s: %w", c.label, err)
	}
	if c.device {
		if err := c.newHandles(); err != nil {
			c.releaseHold()
			c.releaseShares()
			return nil, fmt.Errorf("collectives: %s: %w", c.label, err)
		}
	}
	if err := c.newFences(); err != nil {
		c.releaseHold()
		c.releaseShares()
		return nil, fmt.Errorf("collectives: %s: %w", c.label, err)
	}
	if g.rec != nil && c.s.Traced() != g.rec {
		c.s.TraceTo(g.rec) // a traced group's streams show their commands
	}
	return c, nil
}

// enqueue puts the call's GPU side on its stream, the ledger's check
// first; on failure the caller fails the call (which releases what was
// enqueued).
func (c *call) enqueue() error {
	side, err := inflight.enter(c.p.tag, c.g.Rank(), c.s, c.hasEvent, c.p.hasOut, c.fin, c.fout)
	if err != nil {
		return err
	}
	var upd, wait streams.Event
	if c.device {
		upd, wait, err = c.encodeDevice()
	} else if c.engine {
		upd, wait, err = c.encodeEngine()
	} else if upd, err = c.encodeInput(); err == nil {
		wait, err = c.encodeOutput()
	}
	inflight.done(side, upd, wait)
	return err
}

// pipelinePart is the payload of one part of a pipeline; maxParts bounds
// how many parts one collective is split into. Each part costs a match and
// barriers; measured on the 2-core VM (sim, no staging), 4 ranks, 64 MiB:
// 16 parts of 4 MiB took the all-reduce from 18.5 to 27 ms, 8 parts of
// 8 MiB kept it within the VM's noise.
const (
	pipelinePart = 8 << 20
	maxParts     = 16
)

// pipelineParts is how many parts a collective runs in: more than one only
// for an all-reduce whose payload spans at least two pipelinePart (its
// elements are reduced independently, so a part is an all-reduce of its
// own). The number depends on the descriptor alone, not on the device, so
// ranks with equal descriptors split alike, also where one rank's device
// memory is staged and another's is not (the pipeline pays off only with
// staging; elsewhere it costs a few barriers per part). Part 0 meets a peer
// on the same tags as a whole collective, so ranks whose payloads differ
// meet in the first match, which fails with ErrShapeMismatch
// (algo.Desc.Whole).
func pipelineParts(p plan) int {
	if p.desc.Kind != algo.KindAllReduce || p.in == nil || !p.hasOut {
		return 1
	}
	return max(1, min(maxParts, p.desc.Count*p.desc.DType.Size()/pipelinePart, p.desc.Count))
}

func sizeOf(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// opLabel names one collective call in errors, formatted only when one
// is made.
type opLabel struct {
	name  string
	group uint64
	rank  int
	seq   uint64
}

func (l opLabel) String() string {
	return fmt.Sprintf("%s g%d r%d s%d", l.name, l.group, l.rank, l.seq)
}
