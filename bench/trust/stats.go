package main

import (
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// durations is a list of measured times.
type durations []time.Duration

// quantile is the q-quantile (nearest rank) of ds, -1 when empty.
func (ds durations) quantile(q float64) time.Duration { return rig.Quantile(ds, q) }

// max is the largest of ds, -1 when empty.
func (ds durations) max() time.Duration { return ds.quantile(1) }

// min is the smallest of ds, -1 when empty.
func (ds durations) min() time.Duration { return ds.quantile(0) }

// failures keeps the reasons of a cell's failed tries, for its row: the
// first few in full, then a count.
type failures struct {
	reasons []string
}

// add records one failed try's reason.
func (f *failures) add(reason string) { f.reasons = append(f.reasons, reason) }

// String is the row's cell: up to three reasons, "; "-separated, and how
// many more.
func (f *failures) String() string { return rig.FirstFew(f.reasons, 3) }

// String is ds in milliseconds, for the progress log.
func (ds durations) String() string {
	out := "["
	for i, d := range ds {
		if i > 0 {
			out += " "
		}
		out += d.Round(time.Millisecond).String()
	}
	return out + "]"
}
