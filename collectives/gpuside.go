package collectives

import (
	"fmt"
	"weak"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

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
