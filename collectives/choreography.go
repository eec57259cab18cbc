package collectives

import (
	"context"
	"fmt"
	"runtime"
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
	outShape []int        // nil for Send
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
	}
	nb := p.desc.Count * p.desc.DType.Size()
	if g.cfg.maxBytes > 0 && nb > g.cfg.maxBytes {
		return nil, fmt.Errorf("collectives: %s rank %d: %d bytes, limit %d: %w", name, g.Rank(), nb, g.cfg.maxBytes, ErrTooLarge)
	}
	return nil, nil
}

// choreograph encodes the GPU side and queues the comm task. Where the CPU
// cannot see device memory, the input is staged into pinned host memory
// and the output copied back, both on the GPU stream, ordered by the
// fence, so the comm task only ever touches host memory.
//
// A large all-reduce runs as a pipeline of parts (see pipelineParts):
// the GPU stream copies part after part into host memory, raising the
// input fence after each; the comm task reduces each part as soon as it
// has landed and raises the output fence, whose waits hold back each
// part's copy back. Copies in, reduction and copies out then overlap. The
// two directions need a fence each: a fence's two sides take turns in the
// same order, and here the GPU side updates all parts before it waits for
// the first. A single part uses one fence for both, as every other
// collective does.
//
// Lifetimes: the staging buffers are shared by the GPU stream and the comm
// task and freed when both are done with them (a released fence lets the
// GPU side finish while the task may still run). The fences' deadlines are
// set when the task starts; until then they allow for the tasks queued
// ahead of it on the comm stream.
func (g *Group) choreograph(name string, p plan) (*array.Array, error) {
	s, dev := p.s, p.s.Device()
	visible := dev.Properties().HostVisibleDeviceMem
	// R3: whether the input has a producer event, decided once. Staging
	// always makes one (the copy into host memory), and so does donation:
	// commands queued earlier on s may still read the input, so the task
	// must not write into it before the stream has passed them (R12).
	hasEvent := p.in != nil && (!visible || !p.in.Ready() || p.donate)
	parts := pipelineParts(p)
	label := opLabel{name, g.id, g.Rank(), p.desc.Seq}
	queued := time.Duration(g.comm.Pending()+1) * (g.cfg.timeout + time.Second)
	newFence := func() (*fence.Fence, error) {
		return g.rt.Fences().New(dev, fence.WithTimeout(queued), fence.WithName(name),
			fence.WithoutCleanup()) // the task's Done ends it on every path
	}
	fin, err := newFence() // the input side: GPU updates, CPU waits
	if err != nil {
		return nil, fmt.Errorf("collectives: %s: %w", label, err)
	}
	fout := fin // the output side: CPU updates, GPU waits
	if parts > 1 {
		if fout, err = newFence(); err != nil {
			fin.Fail(err)
			return nil, fmt.Errorf("collectives: %s: %w", label, err)
		}
	}
	fences := []*fence.Fence{fin}
	if fout != fin {
		fences = append(fences, fout)
	}
	failAll := func(err error) {
		for _, f := range fences {
			f.Fail(err)
		}
	}
	var hostIn, hostOut *shared // staging, where the CPU cannot see device memory
	fail := func(err error) (*array.Array, error) {
		failAll(err)
		hostIn.release() // the task's shares: it will never run
		hostOut.release()
		return nil, fmt.Errorf("collectives: %s: %w", label, err)
	}
	// span is part i's byte range of an n-byte payload.
	span := func(i, n int) (lo, hi int) {
		if parts == 1 {
			return 0, n
		}
		es := p.desc.DType.Size()
		lo, hi = algo.BlockRange(p.desc.Count, parts, i)
		return lo * es, hi * es
	}

	var inBuf gpu.Buffer
	if p.in != nil {
		inBuf = p.in.Buffer()
		staged := !visible && p.in.NBytes() > 0
		if staged {
			if hostIn, err = g.staging.get(dev, p.in.NBytes()); err != nil {
				return fail(err)
			}
		}
		in := p.in
		for i := range parts {
			if staged {
				lo, hi := span(i, in.NBytes())
				hostIn.refs.Add(1) // the staging copy's share
				_, err = s.Enqueue([]gpu.Command{gpu.Copy{Dst: hostIn.buf, DstOff: lo, Src: inBuf, SrcOff: lo, Bytes: hi - lo}}, func(err error) {
					if err != nil {
						failAll(fmt.Errorf("stage input: %w", err))
					}
					hostIn.release()
					runtime.KeepAlive(in)
				})
				if err != nil {
					hostIn.release() // the copy's share: it will never run
					return fail(err)
				}
			}
			if hasEvent {
				if err := fin.UpdateGPU(s, p.in); err != nil {
					return fail(err)
				}
			}
		}
	}

	var out *array.Array
	var outBuf gpu.Buffer
	var outMem *array.Memory
	if p.outShape != nil {
		if p.donate && p.in != nil && p.in.DType() == p.outDType && p.in.NBytes() == sizeOf(p.outShape)*p.outDType.Size() {
			out, err = array.Wrap(s, p.outShape, p.outDType, p.in.Memory(), streams.Event{})
		} else {
			out, err = array.New(s, p.outShape, p.outDType)
		}
		if err != nil {
			return fail(err)
		}
		outMem = out.Memory() // the task holds the memory, never the output (R16)
		outBuf = outMem.Buffer()
		nb := out.NBytes()
		if !visible && nb > 0 {
			if hostOut, err = g.staging.get(dev, nb); err != nil {
				return fail(err)
			}
		}
		var ev streams.Event
		for i := range parts {
			var guard fence.Guarded
			if i == 0 {
				guard = weakOutput{weak.Make(out)} // a failed fence fails it, whichever wait
			}
			if ev, err = fout.WaitGPU(s, guard); err != nil {
				return fail(err)
			}
			if hostOut != nil {
				lo, hi := span(i, nb)
				om := outMem
				hostOut.refs.Add(1) // the copy-back's share
				ev, err = s.Enqueue([]gpu.Command{gpu.Copy{Dst: outBuf, DstOff: lo, Src: hostOut.buf, SrcOff: lo, Bytes: hi - lo}}, func(error) {
					hostOut.release()
					runtime.KeepAlive(om) // until the copy has run
				})
				if err != nil {
					hostOut.release() // the copy's share
					return fail(err)
				}
			}
		}
		out.SetEvent(ev)
	}

	in := p.in // the task keeps the input alive (R16), never the output
	start := time.Now()
	task := streams.Task{Name: name, Run: func(ctx context.Context) error {
		for _, f := range fences {
			f.SetTimeout(g.cfg.timeout + time.Second) // the deadline counts from now
		}
		cctx, cancel := context.WithTimeout(ctx, g.cfg.timeout)
		defer cancel()
		var inB, outB []byte
		if in != nil {
			inB = hostIn.bytes(inBuf, in.NBytes())
		}
		if outBuf != nil {
			outB = hostOut.bytes(outBuf, sizeOf(p.outShape)*p.outDType.Size())
		}
		for i := range parts {
			// A failure before the algorithm runs aborts the collective,
			// so the peers fail at once rather than at their deadline.
			if hasEvent {
				if err := fin.Wait(cctx); err != nil {
					g.t.Abort(p.tag, err)
					return err
				}
			}
			// R11: an input whose producer failed after launch must not
			// be reduced or sent as if it were data.
			if in != nil {
				if err := in.Err(); err != nil {
					err = fmt.Errorf("input: %w", err)
					g.t.Abort(p.tag, err)
					return err
				}
			}
			d, pin, pout := p.desc, inB, outB
			if parts > 1 {
				lo, hi := span(i, len(inB))
				d.Part, d.Whole, d.Count = uint32(i), d.Count, (hi-lo)/d.DType.Size()
				pin, pout = inB[lo:hi], outB[lo:hi]
			}
			if err := p.run(cctx, d, pin, pout); err != nil {
				return err
			}
			if p.outShape != nil {
				if err := fout.Update(); err != nil {
					// Released under us (the GPU side failed): the peers
					// must not wait for this rank's next part.
					g.t.Abort(p.tag, err)
					return err
				}
			}
		}
		runtime.KeepAlive(outMem) // valid until the GPU side has its data
		return nil
	}, Done: func(err error) {
		hostIn.release()
		hostOut.release()
		if err != nil {
			err = fmt.Errorf("collectives: %s: %w", label, err)
			failAll(err)
			g.record(err)
		} else {
			for _, f := range fences {
				f.Release()
			}
		}
		if g.cfg.trace != nil {
			var steps []fence.Step
			for _, f := range fences {
				steps = append(steps, f.Trace()...)
			}
			g.cfg.trace(TraceEvent{Op: name, Rank: g.Rank(), Seq: p.desc.Seq, HasEvent: hasEvent,
				Steps: steps, Elapsed: time.Since(start), Err: err})
		}
	}}
	if err := g.comm.Submit(task); err != nil {
		return fail(err)
	}
	return out, nil
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
	if p.desc.Kind != algo.KindAllReduce || p.in == nil || p.outShape == nil {
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
