package collectives

import (
	"context"
	"fmt"
	"time"
	"weak"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/fence"
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
	outDType gpu.DType
	donate   bool
	p2p      bool // sequence numbers per peer pair, not per group
	// run is the collective itself, on host bytes; out is nil for Send.
	run func(ctx context.Context, d algo.Desc, in, out []byte) error
}

// weakOutput is what the fence guards: a weak pointer, so that neither the
// fence nor the comm task keeps the output alive (R16).
type weakOutput struct{ p weak.Pointer[array.Array] }

// Fail implements fence.Guarded.
func (w weakOutput) Fail(err error) {
	if a := w.p.Value(); a != nil {
		a.Fail(err)
	}
}

// launch puts a plan on the GPU stream and the rank's comm stream (R15) and
// returns the output at once. A call that fails here still takes its
// sequence number (per group, or per peer pair for send/recv) and aborts
// that collective for the peers, so that they fail at once and later calls
// stay matched (R18).
func (g *Group) launch(p plan) (*array.Array, error) {
	name := p.desc.Kind.String()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, fmt.Errorf("collectives: %s rank %d: %w", name, g.Rank(), ErrClosed)
	}
	p.desc.Group = g.id
	var tag transport.Tag // what an early failure aborts
	switch {
	case !p.p2p:
		g.seq++
		p.desc.Seq = g.seq
		tag = algoTag(g.id, p.desc.Seq)
	case p.desc.Peer < 0 || p.desc.Peer >= g.Size() || p.desc.Peer == g.Rank():
		return nil, fmt.Errorf("collectives: %s rank %d: peer %d in a group of %d: %w",
			name, g.Rank(), p.desc.Peer, g.Size(), ErrBadPeer)
	case p.desc.Kind == algo.KindSend:
		g.sendSeq[p.desc.Peer]++
		p.desc.Seq = g.sendSeq[p.desc.Peer]
		tag = algo.P2PTag(g.id, g.Rank(), p.desc.Peer, p.desc.Seq)
	default:
		g.recvSeq[p.desc.Peer]++
		p.desc.Seq = g.recvSeq[p.desc.Peer]
		tag = algo.P2PTag(g.id, p.desc.Peer, g.Rank(), p.desc.Seq)
	}
	p.tag = tag
	out, err := g.check(name, &p)
	if err == nil {
		out, err = g.choreograph(name, p)
	}
	if err != nil {
		g.t.Abort(tag, err) // the peers are in this collective too
	}
	return out, err
}

// check rejects what this rank can tell is wrong by itself. Errors about
// the group as a whole (an unknown op, a root out of range, shapes that
// differ across ranks) are found by the algorithms on every rank (R18).
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

// call is one collective call on its way onto the streams: what it
// decided, what it holds and its fences. Its staging buffers and retained
// memories are the comm task's shares, given back when the task is done
// (or at once if the call fails before the task is queued); every GPU
// command that uses one holds a share of its own until it has run.
type call struct {
	g      *Group
	p      plan
	label  opLabel
	s      *streams.GPU
	dev    gpu.Device
	parts  int
	staged bool // the CPU cannot see device memory: copy through hostIn/hostOut
	// hasEvent (R3): whether the input has a producer event, decided once.
	// Staging always makes one (the copy into host memory), and so does
	// donation: commands queued earlier on s may still read the input, so
	// the task must not write into it before the stream has passed them.
	hasEvent bool

	inMem, outMem   *array.Memory // retained by the call (nil when absent)
	out             *array.Array
	hostIn, hostOut *shared
	fin, fout       *fence.Fence // input side (GPU updates), output side (CPU updates)
	fences          []*fence.Fence
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
	c := &call{g: g, p: p, label: opLabel{name, g.id, g.Rank(), p.desc.Seq}, s: p.s, dev: p.s.Device(),
		parts: pipelineParts(p)}
	c.staged = !c.dev.Properties().HostVisibleDeviceMem
	c.hasEvent = p.in != nil && (c.staged || !p.in.Ready() || p.donate)
	if err := c.allocate(); err != nil {
		c.releaseShares()
		return nil, fmt.Errorf("collectives: %s: %w", c.label, err)
	}
	if err := c.newFences(); err != nil {
		c.releaseShares()
		return nil, fmt.Errorf("collectives: %s: %w", c.label, err)
	}
	side, err := inflight.enter(p.tag, g.Rank(), c.s, c.hasEvent, p.hasOut)
	if err != nil {
		return c.fail(err)
	}
	upd, err := c.encodeInput()
	var wait streams.Event
	if err == nil {
		wait, err = c.encodeOutput()
	}
	inflight.done(side, upd, wait)
	if err != nil {
		return c.fail(err)
	}
	if err := g.comm.Submit(c.task()); err != nil {
		return c.fail(err)
	}
	return c.out, nil
}

// allocate retains the input's memory, makes the output (taking over a
// donated input's memory) and the staging buffers. It does all the work
// proportional to the payload that a launch does (a new buffer's fill)
// before any fence exists, so none of it counts against a deadline.
func (c *call) allocate() error {
	p := c.p
	if p.in != nil {
		mem := p.in.Memory()
		if err := mem.Retain(); err != nil {
			return fmt.Errorf("input: %w", err)
		}
		c.inMem = mem
		if c.staged && p.in.NBytes() > 0 {
			var err error
			if c.hostIn, err = c.g.staging.get(c.dev, p.in.NBytes()); err != nil {
				return err
			}
		}
	}
	if !p.hasOut {
		return nil
	}
	var err error
	if p.donate && p.in != nil && p.in.DType() == p.outDType && p.in.NBytes() == sizeOf(p.outShape)*p.outDType.Size() {
		c.out, err = array.Wrap(c.s, p.outShape, p.outDType, p.in.Memory(), streams.Event{})
	} else {
		c.out, err = array.New(c.s, p.outShape, p.outDType)
	}
	if err != nil {
		return err
	}
	mem := c.out.Memory() // the task holds the memory, never the output (R16)
	if err := mem.Retain(); err != nil {
		return fmt.Errorf("output: %w", err)
	}
	c.outMem = mem
	if nb := c.out.NBytes(); c.staged && nb > 0 {
		if c.hostOut, err = c.g.staging.get(c.dev, nb); err != nil {
			return err
		}
	}
	return nil
}

// newFences makes the input fence and, for a pipeline, the output fence.
// Their deadlines allow for the tasks queued ahead of this one on the comm
// stream; the task gives them their full time when it starts.
func (c *call) newFences() error {
	g := c.g
	queued := time.Duration(g.comm.Pending()+1) * (g.cfg.timeout + time.Second)
	newFence := func() (*fence.Fence, error) {
		return g.fences.New(c.dev, fence.WithTimeout(queued), fence.WithName(c.label.name),
			fence.WithoutCleanup()) // the task's Done ends it on every path
	}
	var err error
	if c.fin, err = newFence(); err != nil {
		return err
	}
	c.fout, c.fences = c.fin, []*fence.Fence{c.fin}
	if c.parts > 1 {
		if c.fout, err = newFence(); err != nil {
			c.fin.Fail(err)
			return err
		}
		c.fences = append(c.fences, c.fout)
	}
	return nil
}

// fail ends a call that could not be queued: its fences fail (releasing any
// GPU wait already encoded) and the task's shares go back.
func (c *call) fail(err error) (*array.Array, error) {
	c.failFences(err)
	c.releaseShares()
	return nil, fmt.Errorf("collectives: %s: %w", c.label, err)
}

func (c *call) failFences(err error) {
	for _, f := range c.fences {
		f.Fail(err)
	}
}

// releaseShares gives back what the call (its task) holds.
func (c *call) releaseShares() {
	c.hostIn.release()
	c.hostOut.release()
	if c.inMem != nil {
		c.inMem.Release()
	}
	if c.outMem != nil {
		c.outMem.Release()
	}
}

// span is part i's byte range of an n-byte payload.
func (c *call) span(i, n int) (lo, hi int) {
	if c.parts == 1 {
		return 0, n
	}
	es := c.p.desc.DType.Size()
	lo, hi = algo.BlockRange(c.p.desc.Count, c.parts, i)
	return lo * es, hi * es
}

// encodeInput puts the input side on the GPU stream: per part, the copy
// into host memory (staged) and the update the task waits for. It returns
// an Event after the last update (invalid if there is none).
func (c *call) encodeInput() (streams.Event, error) {
	in := c.p.in
	if in == nil || !c.hasEvent {
		return streams.Event{}, nil
	}
	s, nb := c.s, in.NBytes()
	for i := range c.parts {
		if c.hostIn == nil {
			if err := c.fin.UpdateGPU(s, in); err != nil {
				return streams.Event{}, err
			}
			continue
		}
		// The copy and the update are one unit: a failed copy skips the
		// update and fails the fence, so the task never reads the part.
		lo, hi := c.span(i, nb)
		cp := gpu.Copy{Dst: c.hostIn.buf, DstOff: lo, Src: c.inMem.Buffer(), SrcOff: lo, Bytes: hi - lo}
		release, err := c.holdForCopy(c.hostIn, c.inMem)
		if err != nil {
			return streams.Event{}, err
		}
		if err := c.fin.UpdateGPUAfter(s, in, []gpu.Command{cp}, func(error) { release() }); err != nil {
			return streams.Event{}, err
		}
	}
	return s.Last(), nil
}

// encodeOutput puts the output side on the GPU stream: per part, the wait
// for the task's update and the copy back (staged). The output's readiness
// is the last of them; a failed fence fails the output, whichever wait.
func (c *call) encodeOutput() (streams.Event, error) {
	if c.out == nil {
		return streams.Event{}, nil
	}
	nb := c.out.NBytes()
	var ev streams.Event
	var err error
	for i := range c.parts {
		var guard fence.Guarded
		if i == 0 {
			guard = weakOutput{weak.Make(c.out)}
		}
		if ev, err = c.fout.WaitGPU(c.s, guard); err != nil {
			return streams.Event{}, err
		}
		if c.hostOut != nil {
			lo, hi := c.span(i, nb)
			if err := c.enqueueCopy(gpu.Copy{Dst: c.outMem.Buffer(), DstOff: lo, Src: c.hostOut.buf, SrcOff: lo, Bytes: hi - lo},
				c.hostOut, c.outMem, "copy output back"); err != nil {
				return streams.Event{}, err
			}
			ev = c.s.Last()
		}
	}
	c.out.SetEvent(ev)
	return ev, nil
}

// holdForCopy takes the shares a staging copy holds until it has run: of
// its staging buffer and of the array memory it reads or writes.
func (c *call) holdForCopy(host *shared, mem *array.Memory) (release func(), err error) {
	if err := mem.Retain(); err != nil { // cannot fail while the call holds a share
		return nil, err
	}
	host.refs.Add(1)
	return func() {
		host.release()
		mem.Release()
	}, nil
}

// enqueueCopy puts a staging copy on the GPU stream, holding its shares
// until it has run. A failed copy fails the call's fences.
func (c *call) enqueueCopy(cp gpu.Copy, host *shared, mem *array.Memory, what string) error {
	release, err := c.holdForCopy(host, mem)
	if err != nil {
		return err
	}
	_, err = c.s.Enqueue([]gpu.Command{cp}, func(err error) {
		if err != nil {
			c.failFences(fmt.Errorf("%s: %w", what, err))
		}
		release()
	})
	if err != nil {
		release()
	}
	return err
}

// task is the comm stream's side (R15): per part, wait for the input
// fence, check the input, run the collective on host bytes, raise the
// output fence. Done gives the call's shares back and ends the fences. The
// task holds the input's and the output's memory, never the output array
// itself (R16).
func (c *call) task() streams.Task {
	g, p := c.g, c.p
	start := time.Now()
	return streams.Task{Name: c.label.name, Run: func(ctx context.Context) error {
		for _, f := range c.fences {
			f.SetTimeout(g.cfg.timeout + time.Second) // the deadline counts from now
		}
		cctx, cancel := context.WithTimeout(ctx, g.cfg.timeout)
		defer cancel()
		var inB, outB []byte
		if c.inMem != nil {
			inB = c.hostIn.bytes(c.inMem.Buffer(), p.in.NBytes())
		}
		if c.outMem != nil {
			outB = c.hostOut.bytes(c.outMem.Buffer(), sizeOf(p.outShape)*p.outDType.Size())
		}
		for i := range c.parts {
			if err := c.runPart(cctx, i, inB, outB); err != nil {
				return err
			}
		}
		return nil
	}, Done: func(err error) {
		c.releaseShares()
		if err != nil {
			err = g.closedErr(fmt.Errorf("collectives: %s: %w", c.label, err))
			c.failFences(err)
			g.record(err)
		} else {
			for _, f := range c.fences {
				f.Release()
			}
		}
		if g.cfg.trace != nil {
			var steps []fence.Step
			for _, f := range c.fences {
				steps = append(steps, f.Trace()...)
			}
			g.cfg.trace(TraceEvent{Op: c.label.name, Rank: g.Rank(), Seq: p.desc.Seq, HasEvent: c.hasEvent,
				Steps: steps, Elapsed: time.Since(start), Err: err})
		}
	}}
}

// runPart is part i of the task. A failure before the algorithm runs
// aborts the collective, so the peers fail at once rather than at their
// deadline.
func (c *call) runPart(ctx context.Context, i int, inB, outB []byte) error {
	p, t := c.p, c.g.t
	if c.hasEvent {
		if err := c.fin.Wait(ctx); err != nil {
			t.Abort(p.tag, err)
			return err
		}
	}
	// R11: an input whose producer failed after launch must not be reduced
	// or sent as if it were data.
	if p.in != nil {
		if err := p.in.Err(); err != nil {
			err = fmt.Errorf("input: %w", err)
			t.Abort(p.tag, err)
			return err
		}
	}
	d, pin, pout := p.desc, inB, outB
	if c.parts > 1 {
		lo, hi := c.span(i, len(inB))
		d.Part, d.Whole, d.Count = uint32(i), d.Count, (hi-lo)/d.DType.Size()
		pin, pout = inB[lo:hi], outB[lo:hi]
	}
	if err := p.run(ctx, d, pin, pout); err != nil {
		return err
	}
	if p.hasOut {
		if err := c.fout.Update(); err != nil {
			// Released under us (the GPU side failed): the peers must not
			// wait for this rank's next part.
			t.Abort(p.tag, err)
			return err
		}
	}
	return nil
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
