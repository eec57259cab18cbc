package collectives

import (
	"runtime"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/trace"
)

// traceTask records the comm task of a call as a span of the rank's comm
// stream, from when it began to run (t0; 0 if it never ran) to now: the
// fence waits and updates it made, and its collective's transport calls,
// fall inside it.
func (c *call) traceTask(t0 int64, err error) {
	g := c.g
	if t0 == 0 {
		t0 = g.rec.Now()
	}
	e := trace.Event{Group: g.id, Seq: c.p.desc.Seq, Count: c.parts,
		Bytes: int64(c.p.desc.Count * c.p.desc.DType.Size())}
	if err != nil {
		e.Err = err.Error()
	}
	g.rec.Span("comm", g.comm.Name(), c.label.name, t0, e)
}

// handoffs follows one traced call along its critical path on this rank,
// by the goroutines that carry it: the caller that launched it, the comm
// stream's goroutine that ran its task, the goroutine that completed the
// input side's fence update on the GPU stream (where the task waits for
// one) and the one that completed the output side's wait (which completes
// the output's event, the caller's to see). Each change of goroutine from
// one to the next is a hand-off: a message to another goroutine, and a
// wake-up wherever that goroutine is parked. Once the last of them is
// known, the count goes on the trace as a "hand-offs" instant of the comm
// stream's track (Count: the hand-offs, Group and Seq: the call). The
// transport's exchanges with the peers inside the task are not counted:
// they are the collective itself, not this rank's work changing hands.
type handoffs struct {
	launch, task, in, out atomic.Int64 // goroutine ids; 0: not seen
	left                  atomic.Int32 // ends still to come (see end)
}

// newHandoffs starts following a call on its launching goroutine, or
// returns nil where the call is not traced or not on the host path.
func (c *call) newHandoffs() *handoffs {
	if c.g.rec == nil || c.device || c.engine {
		return nil
	}
	h := &handoffs{}
	h.launch.Store(goid())
	h.left.Store(1) // the task's end
	return h
}

// sawTask notes the goroutine that runs the task.
func (h *handoffs) sawTask() {
	if h != nil {
		h.task.Store(goid())
	}
}

// inLeg and outLeg return the done callback of the input side's update
// and of the output side's wait: it calls then (if any) and notes the
// goroutine that completed the step. With a nil h they return then.
func (h *handoffs) inLeg(c *call, then func(error)) func(error) {
	if h == nil {
		return then
	}
	return h.leg(c, &h.in, then)
}

func (h *handoffs) outLeg(c *call, then func(error)) func(error) {
	if h == nil {
		return then
	}
	return h.leg(c, &h.out, then)
}

func (h *handoffs) leg(c *call, at *atomic.Int64, then func(error)) func(error) {
	h.left.Add(1)
	return func(err error) {
		if then != nil {
			then(err)
		}
		at.Store(goid())
		h.end(c)
	}
}

// end is one of the ends counted in left; the last records the count.
func (h *handoffs) end(c *call) {
	if h == nil || h.left.Add(-1) != 0 {
		return
	}
	c.g.rec.Instant("comm", c.g.comm.Name(), "hand-offs",
		trace.Event{Group: c.g.id, Seq: c.p.desc.Seq, Count: h.count()})
}

// count is the hand-offs on the critical path: from the caller to the
// task, directly or through the input's update, whichever crosses more;
// then from the task to the output's completion and back to the caller.
func (h *handoffs) count() int {
	launch, task, in, out := h.launch.Load(), h.task.Load(), h.in.Load(), h.out.Load()
	hop := func(a, b int64) int {
		if a != b {
			return 1
		}
		return 0
	}
	n := hop(launch, task)
	if in != 0 {
		n = max(n, hop(launch, in)+hop(in, task))
	}
	if out != 0 {
		n += hop(task, out) + hop(out, launch)
	}
	return n
}

// goid is the calling goroutine's id, read from its stack header
// ("goroutine 42 [running]:"); it costs about a microsecond, so only
// traced calls read it.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = b[min(len(b), len("goroutine ")):]
	var id int64
	for _, d := range b {
		if d < '0' || d > '9' {
			break
		}
		id = id*10 + int64(d-'0')
	}
	return id
}
