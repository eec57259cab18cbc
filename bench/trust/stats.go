package main

import (
	"slices"
	"strconv"
	"time"
)

// durations is a list of measured times.
type durations []time.Duration

// quantile is the q-quantile (nearest rank) of ds, -1 when empty.
func (ds durations) quantile(q float64) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[min(max(i, 0), len(s)-1)]
}

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
func (f *failures) String() string {
	const shown = 3
	if len(f.reasons) == 0 {
		return ""
	}
	out := ""
	for i, r := range f.reasons {
		if i == shown {
			out += "; ... " + strconv.Itoa(len(f.reasons)-shown) + " more"
			break
		}
		if i > 0 {
			out += "; "
		}
		out += r
	}
	return out
}

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
