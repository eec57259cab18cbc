// Package trace records, per rank, a timeline of what a choreography did:
// the spans of GPU stream commands, comm tasks, transport sends and
// receives, fence waits and updates with their values, and failures. It
// writes them in the Chrome trace event format, which ui.perfetto.dev and
// chrome://tracing open: one process per rank, one track per stream, and a
// flow arrow from each fence update to the wait it releases.
//
//	tr := trace.New(trace.WithCapacity(1 << 16))
//	groups, err := collectives.Local(rt, 4, collectives.WithTracer(tr))
//	... collectives ...
//	err = tr.WriteJSON(f)
//
// Cost. Every hook holds a *Recorder that is nil while tracing is off: the
// hot path pays one pointer check and allocates nothing. On, an event is
// copied into a bounded ring per rank under a short critical section (the
// last N events are kept; older ones are overwritten), with timestamps from
// the monotonic clock.
//
// Processes of a cluster each write their part (WriteJSON); Merge joins
// the parts into one file, shifting each by its epoch and the clock offset
// measured at rendezvous (Tracer.SetClockOffset). The package imports only
// the standard library, so every layer may record into it.
package trace
