package collectives

import (
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

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
	// hasEvent: whether the input has a producer event, decided once at
	// launch; the one flag drives both the GPU side and the comm task.
	// Staging always makes one (the copy into host memory), and so does
	// donation: commands queued earlier on s may still read the input, so
	// the task must not write into it before the stream has passed them.
	hasEvent bool

	inMem, outMem   *array.Memory // retained by the call (nil when absent)
	out             *array.Array
	hostIn, hostOut *shared
	fin, fout       *fence.Fence // input side (GPU updates), output side (CPU updates)
	fences          []*fence.Fence
	// device: the call runs on the device-resident path (devicecall.go),
	// its kernels reading the peers' buffers through hold's table.
	device  bool
	hold    *peerHold
	engine  bool       // the call runs on the engine path (engine.go)
	handles [2]*handle // input, output
	t0      int64      // when the task began to run, on the trace (traced only)
	hops    *handoffs  // the call's hand-offs (traced host path only)
	// board and sig: the call's post on its world's board (earlymatch.go),
	// nil where the ranks are not one in-process world.
	board *sigBoard
	sig   *callSig
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
			c.g.stagingBytes.Add(int64(c.hostIn.key.class))
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
	mem := c.out.Memory() // the task holds the memory, never the output
	if err := mem.Retain(); err != nil {
		return fmt.Errorf("output: %w", err)
	}
	c.outMem = mem
	if nb := c.out.NBytes(); c.staged && nb > 0 {
		if c.hostOut, err = c.g.staging.get(c.dev, nb); err != nil {
			return err
		}
		c.g.stagingBytes.Add(int64(c.hostOut.key.class))
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
		opts := [...]fence.Option{fence.WithTimeout(queued), fence.WithName(c.label.name),
			fence.WithoutCleanup(), nil} // the task's Done ends it on every path
		n := 3
		if g.rec != nil {
			opts[n] = fence.WithTrace(g.rec, g.comm.Name())
			n++
		}
		return g.fences.New(c.dev, opts[:n]...)
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
	c.releaseHold()
	c.releaseShares()
	return nil, c.g.opError(c.label, err)
}

func (c *call) failFences(err error) {
	for _, f := range c.fences {
		f.Fail(err)
	}
}

// releaseShares gives back what the call (its task) holds.
func (c *call) releaseShares() {
	for _, h := range [...]*shared{c.hostIn, c.hostOut} {
		if h != nil {
			c.g.stagingBytes.Add(-int64(h.key.class))
		}
	}
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
