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
// Processes of a cluster each write their part (Tracer.Save to
// PartPath(dir, rank), dir given by the launcher in CHOREO_TRACE_DIR);
// Merge joins parts into one file, shifting each by its epoch and the
// clock offset measured at rendezvous (Tracer.SetClockOffset). A launcher
// calls MergeDir once its ranks have ended, however they ended: it merges
// the parts that exist, keeps the events of a part cut short by a kill
// (ErrTruncated), and says which ranks left none. Save writes a file whole
// or not at all, so a rank may save on a signal and again at exit.
//
// Ids are exact: a group id is written as a decimal string and any number
// above 2^53 as one, and ReadFile keeps args' numbers as json.Number, so a
// 64-bit id survives reading, merging and writing again. Stop ends the
// recording once a run is over, so that its shutdown (peers leaving,
// receives failing as they go) is not drawn as failures.
//
// The package imports only the standard library, so every layer may
// record into it.
package trace
