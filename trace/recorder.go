package trace

import (
	"sync"
	"sync/atomic"
	"time"
)

// Recorder is one rank's bounded event buffer. A nil *Recorder records
// nothing and costs one pointer check, so hooks keep a nil one while
// tracing is off. Its methods are safe for concurrent use.
type Recorder struct {
	rank  int
	epoch time.Time    // monotonic clock reading shared by the tracer's ranks
	stop  *atomic.Bool // the tracer's: set, Record drops events

	mu    sync.Mutex
	ring  []Event // the last len(ring) events; next is the oldest once full
	next  int
	total uint64 // events recorded in all, kept or overwritten
}

func newRecorder(rank int, epoch time.Time, capacity int, stop *atomic.Bool) *Recorder {
	return &Recorder{rank: rank, epoch: epoch, stop: stop, ring: make([]Event, 0, capacity)}
}

// On reports whether r records: whether it is not nil.
func (r *Recorder) On() bool { return r != nil }

// Rank is the rank r records for.
func (r *Recorder) Rank() int { return r.rank }

// Now is the time since the epoch on the monotonic clock; 0 on a nil
// Recorder, which does not read the clock.
func (r *Recorder) Now() int64 {
	if r == nil {
		return 0
	}
	return int64(time.Since(r.epoch))
}

// Record keeps e, overwriting the oldest event once the ring is full; it
// drops e once the tracer has stopped.
func (r *Recorder) Record(e Event) {
	if r == nil || r.stop.Load() {
		return
	}
	r.mu.Lock()
	if len(r.ring) < cap(r.ring) {
		r.ring = append(r.ring, e)
	} else {
		r.ring[r.next] = e
		r.next++
		if r.next == len(r.ring) {
			r.next = 0
		}
	}
	r.total++
	r.mu.Unlock()
}

// Span records a span of track from start (a Now reading) to now.
func (r *Recorder) Span(cat, track, name string, start int64, e Event) {
	if r == nil {
		return
	}
	e.Kind, e.Cat, e.Track, e.Name, e.TS = Span, cat, track, name, start
	e.Dur = r.Now() - start
	r.Record(e)
}

// Instant records a point event on track at now.
func (r *Recorder) Instant(cat, track, name string, e Event) {
	if r == nil {
		return
	}
	e.Kind, e.Cat, e.Track, e.Name, e.TS = Instant, cat, track, name, r.Now()
	r.Record(e)
}

// Events returns the events kept, oldest first.
func (r *Recorder) Events() []Event {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Event, 0, len(r.ring))
	out = append(out, r.ring[r.next:]...)
	return append(out, r.ring[:r.next]...)
}

// Dropped counts the events overwritten because the ring was full.
func (r *Recorder) Dropped() uint64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total - uint64(len(r.ring))
}

// Last returns up to n of the latest events of each of tracks, oldest
// first: what a stream did just before a hang.
func (r *Recorder) Last(n int, tracks ...string) []Event {
	evs := r.Events()
	want := map[string]int{}
	for _, t := range tracks {
		want[t] = n
	}
	var keep []Event
	for i := len(evs) - 1; i >= 0; i-- {
		if left, ok := want[evs[i].Track]; ok && left > 0 {
			want[evs[i].Track] = left - 1
			keep = append(keep, evs[i])
		}
	}
	for i, j := 0, len(keep)-1; i < j; i, j = i+1, j-1 {
		keep[i], keep[j] = keep[j], keep[i]
	}
	return keep
}
