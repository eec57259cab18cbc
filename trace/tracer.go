package trace

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCapacity is how many events a rank keeps by default.
const DefaultCapacity = 1 << 16

// Tracer holds the Recorders of the ranks of one process, on one epoch,
// so their events share a time base. A nil *Tracer traces nothing: its
// Rank is a nil Recorder. Safe for concurrent use.
type Tracer struct {
	capacity int
	epoch    time.Time
	offset   atomic.Int64 // this process's wall clock minus the reference rank's, ns
	stopped  atomic.Bool  // Stop was called: the Recorders drop what comes

	mu    sync.Mutex
	ranks map[int]*Recorder
}

// Option configures a Tracer.
type Option func(*Tracer)

// WithCapacity keeps the last n events per rank (default DefaultCapacity).
func WithCapacity(n int) Option {
	return func(t *Tracer) {
		if n > 0 {
			t.capacity = n
		}
	}
}

// New makes a Tracer whose epoch is now.
func New(opts ...Option) *Tracer {
	t := &Tracer{capacity: DefaultCapacity, epoch: time.Now(), ranks: map[int]*Recorder{}}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Rank returns rank r's Recorder, made on first use; nil for a nil Tracer.
func (t *Tracer) Rank(r int) *Recorder {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := t.ranks[r]
	if rec == nil {
		rec = newRecorder(r, t.epoch, t.capacity, &t.stopped)
		t.ranks[r] = rec
	}
	return rec
}

// Recorders returns the ranks' Recorders in rank order.
func (t *Tracer) Recorders() []*Recorder {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Recorder, 0, len(t.ranks))
	for _, r := range t.ranks {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Recorder) int { return a.rank - b.rank })
	return out
}

// SetClockOffset records how far this process's wall clock is ahead of
// the reference rank's (measured at rendezvous); Merge subtracts it.
func (t *Tracer) SetClockOffset(d time.Duration) {
	if t != nil {
		t.offset.Store(int64(d))
	}
}

// ClockOffset is what SetClockOffset stored.
func (t *Tracer) ClockOffset() time.Duration {
	if t == nil {
		return 0
	}
	return time.Duration(t.offset.Load())
}

// Epoch is the wall-clock time the tracer's timestamps count from.
func (t *Tracer) Epoch() time.Time { return t.epoch }

// Stop ends the recording: every Recorder of t drops the events that come
// after it, and keeps those it has, which WriteJSON still writes. A
// program stops its tracer once its run is over, so that what its
// shutdown does (peers leaving, pending receives failing as they go) is
// not drawn as part of the run.
func (t *Tracer) Stop() {
	if t != nil {
		t.stopped.Store(true)
	}
}

// Save writes every rank's events as one Chrome trace to path, whole or
// not at all (WriteFile): safe to call again, or from a signal handler
// while the ranks still record.
func (t *Tracer) Save(path string) error {
	return WriteFile(path, t.Chrome())
}
