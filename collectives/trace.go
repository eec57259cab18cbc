package collectives

import "github.com/choreo-gpu/choreo/trace"

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
