package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// summaryRow is one line of the run's summary: an op's latencies and, for
// collectives, the bytes each moved and the bus-bandwidth factor.
type summaryRow struct {
	op        string
	lat       []time.Duration
	bytes     float64
	busFactor float64
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func printSummary(w io.Writer, rows []summaryRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tcount\tp50\tp90\tmax\talgbw GB/s\tbusbw GB/s\t")
	for _, r := range rows {
		p50 := percentile(r.lat, 0.5)
		algbw, busbw := "-", "-"
		if r.bytes > 0 {
			a := r.bytes / p50.Seconds() / 1e9
			algbw, busbw = fmt.Sprintf("%.2f", a), fmt.Sprintf("%.2f", a*r.busFactor)
		}
		fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%v\t%s\t%s\t\n", r.op, len(r.lat), round(p50),
			round(percentile(r.lat, 0.9)), round(percentile(r.lat, 1)), algbw, busbw)
	}
	_ = tw.Flush()
}

func round(d time.Duration) time.Duration {
	switch {
	case d > time.Second:
		return d.Round(time.Millisecond)
	case d > time.Millisecond:
		return d.Round(time.Microsecond)
	}
	return d.Round(10 * time.Nanosecond)
}
