package rig

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// Table is one markdown table written as it grows: the title and header
// when made, each row as soon as it is added, so that a long run shows its
// results as they come. Its writes hold the mutex it was made with, so that
// tables and other output sharing one writer do not interleave.
type Table struct {
	w    io.Writer
	mu   *sync.Mutex
	cols int
}

// NewTable writes title and the header row of cols to w, holding mu.
func NewTable(w io.Writer, mu *sync.Mutex, title string, cols ...string) *Table {
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(w, "\n### %s\n\n| %s |\n|%s\n", title, strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	return &Table{w: w, mu: mu, cols: len(cols)}
}

// Row writes one row, with "|" escaped and newlines made spaces; cells
// beyond the header's are dropped, missing ones left empty. A writer with a
// Sync method (a file) is synced after the row, best effort.
func (t *Table) Row(cells ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, t.cols)
	for i := range out {
		if i < len(cells) {
			out[i] = strings.ReplaceAll(strings.ReplaceAll(cells[i], "|", `\|`), "\n", " ")
		}
	}
	fmt.Fprintf(t.w, "| %s |\n", strings.Join(out, " | "))
	if f, ok := t.w.(interface{ Sync() error }); ok {
		_ = f.Sync()
	}
}
