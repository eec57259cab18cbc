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
			if err := c.fin.UpdateGPUAfter(s, in, nil, c.hops.inLeg(c, nil)); err != nil {
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
		if err := c.fin.UpdateGPUAfter(s, in, []gpu.Command{cp}, c.hops.inLeg(c, func(error) { release() })); err != nil {
			return streams.Event{}, err
		}
	}
	return s.Last(), nil
}

// encodeOutput puts the output side on the GPU stream: per part, the wait
// for the task's update and, staged, the copy back, as one Enqueue (one
// batch on the queue, not two). The output's readiness is the last of
// them; a failed fence fails the output, whichever wait, and so does a
// failed copy back.
func (c *call) encodeOutput() (streams.Event, error) {
	if c.out == nil {
		return streams.Event{}, nil
	}
	nb := c.out.NBytes()
	out := weakOutput{weak.Make(c.out)}
	var ev streams.Event
	var err error
	for i := range c.parts {
		var guard fence.Guarded
		if i == 0 {
			guard = out
		}
		var then []gpu.Command
		var done func(error)
		if c.hostOut != nil {
			lo, hi := c.span(i, nb)
			release, err := c.holdForCopy(c.hostOut, c.outMem)
			if err != nil {
				return streams.Event{}, err
			}
			then = []gpu.Command{gpu.Copy{Dst: c.outMem.Buffer(), DstOff: lo, Src: c.hostOut.buf, SrcOff: lo, Bytes: hi - lo}}
			done = func(err error) { // called once, also when the wait could not be enqueued
				if err != nil {
					err = fmt.Errorf("wait and copy output back: %w", err)
					c.failFences(err)
					out.Fail(err)
				}
				release()
			}
		}
		if ev, err = c.fout.WaitGPUThen(c.s, guard, then, c.hops.outLeg(c, done)); err != nil {
			return streams.Event{}, err
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
