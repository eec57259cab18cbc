package collectives

import (
	"context"
	"fmt"
	"runtime"
	"time"
	"weak"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// plan is one collective call, ready to be put on the streams.
type plan struct {
	desc     algo.Desc
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
// returns the output at once.
func (g *Group) launch(p plan) (*array.Array, error) {
	name := p.desc.Kind.String()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, fmt.Errorf("collectives: %s rank %d: %w", name, g.Rank(), ErrClosed)
	}
	p.desc.Group = g.id
	if !p.p2p {
		g.seq++
		p.desc.Seq = g.seq
	}
	if err := g.check(name, &p); err != nil {
		if !p.p2p {
			g.t.Abort(algoTag(g.id, p.desc.Seq), err)
		}
		return nil, err
	}
	switch {
	case !p.p2p:
	case p.desc.Kind == algo.KindSend:
		g.sendSeq[p.desc.Peer]++
		p.desc.Seq = g.sendSeq[p.desc.Peer]
	default:
		g.recvSeq[p.desc.Peer]++
		p.desc.Seq = g.recvSeq[p.desc.Peer]
	}
	out, err := g.choreograph(name, p)
	if err != nil && !p.p2p {
		// The peers are in this collective too: fail it for them at once.
		g.t.Abort(algoTag(g.id, p.desc.Seq), err)
	}
	return out, err
}

// check rejects what this rank can tell is wrong by itself. Errors about
// the group as a whole (an unknown op, a root out of range, shapes that
// differ across ranks) are found by the algorithms on every rank (R18).
func (g *Group) check(name string, p *plan) error {
	if p.s == nil {
		return fmt.Errorf("collectives: %s rank %d: nil stream: %w", name, g.Rank(), ErrBadArgument)
	}
	if p.in != nil {
		if err := p.in.Err(); err != nil {
			return fmt.Errorf("collectives: %s rank %d: input: %w", name, g.Rank(), err)
		}
		if p.in.Stream() != nil && p.in.Stream().Device() != p.s.Device() {
			return fmt.Errorf("collectives: %s rank %d: input lives on another device: %w", name, g.Rank(), ErrBadArgument)
		}
	}
	nb := p.desc.Count * p.desc.DType.Size()
	if g.cfg.maxBytes > 0 && nb > g.cfg.maxBytes {
		return fmt.Errorf("collectives: %s rank %d: %d bytes, limit %d: %w", name, g.Rank(), nb, g.cfg.maxBytes, ErrTooLarge)
	}
	if p.p2p && (p.desc.Peer < 0 || p.desc.Peer >= g.Size() || p.desc.Peer == g.Rank()) {
		return fmt.Errorf("collectives: %s rank %d: peer %d in a group of %d: %w", name, g.Rank(), p.desc.Peer, g.Size(), ErrBadPeer)
	}
	return nil
}

// choreograph encodes the GPU side and queues the comm task. Where the CPU
// cannot see device memory, the input is staged into pinned host memory
// and the output copied back, both on the GPU stream, ordered by the same
// fence, so the comm task only ever touches host memory.
func (g *Group) choreograph(name string, p plan) (*array.Array, error) {
	s, dev := p.s, p.s.Device()
	visible := dev.Properties().HostVisibleDeviceMem
	// R3: whether the input has a producer event, decided once; staging
	// always makes one (the copy into host memory).
	hasEvent := p.in != nil && (!visible || !p.in.Ready())
	label := opLabel{name, g.id, g.Rank(), p.desc.Seq}
	f, err := g.rt.Fences().New(dev, fence.WithTimeout(g.cfg.timeout+time.Second), fence.WithName(name),
		fence.WithoutCleanup()) // the task's Done ends it on every path

	if err != nil {
		return nil, fmt.Errorf("collectives: %s: %w", label, err)
	}
	fail := func(err error) (*array.Array, error) {
		f.Fail(err)
		return nil, fmt.Errorf("collectives: %s: %w", label, err)
	}

	var inBuf, hostIn gpu.Buffer
	if p.in != nil {
		inBuf = p.in.Buffer()
		if !visible && p.in.NBytes() > 0 {
			if hostIn, err = dev.Alloc(p.in.NBytes(), gpu.HostMem); err != nil {
				return fail(err)
			}
			if _, err := s.Enqueue([]gpu.Command{gpu.Copy{Dst: hostIn, Src: inBuf, Bytes: p.in.NBytes()}}, nil); err != nil {
				_ = hostIn.Free()
				return fail(err)
			}
		}
		if hasEvent {
			if err := f.UpdateGPU(s, p.in); err != nil {
				return fail(err)
			}
		}
	}

	var out *array.Array
	var outBuf, hostOut gpu.Buffer
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
			if hostOut, err = dev.Alloc(nb, gpu.HostMem); err != nil {
				return fail(err)
			}
		}
		ev, err := f.WaitGPU(s, weakOutput{weak.Make(out)})
		if err != nil {
			return fail(err)
		}
		if hostOut != nil {
			ho := hostOut
			om := outMem
			ev, err = s.Enqueue([]gpu.Command{gpu.Copy{Dst: outBuf, Src: hostOut, Bytes: nb}}, func(error) {
				_ = ho.Free()
				runtime.KeepAlive(om) // until the copy has run
			})
			if err != nil {
				return fail(err)
			}
		}
		out.SetEvent(ev)
	}

	in := p.in // the task keeps the input alive (R16), never the output
	start := time.Now()
	task := streams.Task{Name: name, Run: func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, g.cfg.timeout)
		defer cancel()
		if hasEvent {
			if err := f.Wait(cctx); err != nil {
				return err
			}
		}
		var inB, outB []byte
		if in != nil {
			inB = hostBytes(hostIn, inBuf, in.NBytes())
		}
		if outBuf != nil {
			outB = hostBytes(hostOut, outBuf, sizeOf(p.outShape)*p.outDType.Size())
		}
		if err := p.run(cctx, p.desc, inB, outB); err != nil {
			return err
		}
		if p.outShape != nil {
			err := f.Update()
			runtime.KeepAlive(outMem) // valid until the GPU side has its data
			return err
		}
		return nil
	}, Done: func(err error) {
		if hostIn != nil {
			_ = hostIn.Free()
		}
		if err != nil {
			err = fmt.Errorf("collectives: %s: %w", label, err)
			f.Fail(err)
			g.record(err)
		} else {
			f.Release()
		}
		if g.cfg.trace != nil {
			g.cfg.trace(TraceEvent{Op: name, Rank: g.Rank(), Seq: p.desc.Seq, HasEvent: hasEvent,
				Steps: f.Trace(), Elapsed: time.Since(start), Err: err})
		}
	}}
	if err := g.comm.Submit(task); err != nil {
		if hostIn != nil {
			_ = hostIn.Free()
		}
		return fail(err)
	}
	return out, nil
}

// hostBytes is the CPU's view of a payload: the staging buffer if there is
// one, else the device buffer itself (host-visible backends).
func hostBytes(staged, buf gpu.Buffer, n int) []byte {
	if staged != nil {
		return staged.Bytes()[:n]
	}
	return buf.Bytes()[:n]
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
