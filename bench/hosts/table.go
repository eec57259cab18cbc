package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// table is one markdown table written as it grows: title and header when
// made, each row as soon as it is added.
type table struct {
	w    io.Writer
	mu   *sync.Mutex
	cols int
}

// newTable writes title and the header row of cols to h's output.
func (h *harness) newTable(title string, cols ...string) *table {
	h.outMu.Lock()
	defer h.outMu.Unlock()
	fmt.Fprintf(h.out, "\n### %s\n\n| %s |\n|%s\n", title, strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	return &table{w: h.out, mu: &h.outMu, cols: len(cols)}
}

// row writes one row; cells beyond the header's are dropped, missing ones
// left empty.
func (t *table) row(cells ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, t.cols)
	for i := range out {
		if i < len(cells) {
			out[i] = strings.ReplaceAll(strings.ReplaceAll(cells[i], "|", `\|`), "\n", " ")
		}
	}
	fmt.Fprintf(t.w, "| %s |\n", strings.Join(out, " | "))
}

// secs is d in seconds with millisecond precision, "-" when negative
// (nothing measured).
func secs(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f s", d.Seconds())
}
