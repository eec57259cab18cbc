package rig

import (
	"fmt"
	"io"
	"sync"
)

// Report is a harness's results on one writer: markdown tables written as
// they grow, and summary lines kept until WriteSummary writes them at the
// end. Safe for concurrent use; tables and the summary do not interleave.
type Report struct {
	w       io.Writer
	mu      sync.Mutex
	summary []string
}

// NewReport is an empty report written to w.
func NewReport(w io.Writer) *Report { return &Report{w: w} }

// Table writes title and the header row of cols and returns the table, for
// its rows.
func (r *Report) Table(title string, cols ...string) *Table {
	return NewTable(r.w, &r.mu, title, cols...)
}

// Summarize adds a line to the summary.
func (r *Report) Summarize(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.summary = append(r.summary, fmt.Sprintf(format, args...))
}

// WriteSummary writes the summary: a "### title" heading, the lines as a
// list, then after as it is ("" for nothing).
func (r *Report) WriteSummary(title, after string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.w, "\n### %s\n\n", title)
	for _, s := range r.summary {
		fmt.Fprintf(r.w, "- %s\n", s)
	}
	fmt.Fprint(r.w, after)
}
