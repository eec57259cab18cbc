package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// benchTable prints the sweep's table a row at a time: its column widths
// are decided up front, from the headers and the widest value each column
// will hold (the longest op, the largest size), so that every row is
// printed, aligned with the rest, as soon as it is measured. Columns are
// right-aligned and two spaces apart; a value wider than its column
// widens that row only.
type benchTable struct {
	w      io.Writer
	widths []int
}

// benchHeaders are the table's columns.
var benchHeaders = []string{"op", "size(B)", "count", "type", "redop", "time(us)", "p50(us)", "algbw GB/s", "busbw GB/s", "#wrong"}

// newBenchTable is the table of a sweep of ops, sizes up to largest
// bytes, elements of type dtype.
func newBenchTable(w io.Writer, ops []string, largest int, dtype string) *benchTable {
	widths := make([]int, len(benchHeaders))
	for i, h := range benchHeaders {
		widths[i] = len(h)
	}
	for _, op := range ops {
		widths[0] = max(widths[0], len(op))
	}
	digits := len(strconv.Itoa(largest))
	widths[1], widths[2] = max(widths[1], digits), max(widths[2], digits)
	widths[3] = max(widths[3], len(dtype))
	widths[4] = max(widths[4], len(unevenLabel))
	widths[5], widths[6] = max(widths[5], 10), max(widths[6], 10) // up to 9999999.9 us
	return &benchTable{w: w, widths: widths}
}

// header prints the column names.
func (t *benchTable) header() { t.line(benchHeaders) }

// row prints one measured row.
func (t *benchTable) row(op string, bytes, count int, dtype, redop string, r result) {
	t.line([]string{op, strconv.Itoa(bytes), strconv.Itoa(count), dtype, redop,
		fmt.Sprintf("%.1f", us(r.batch)), fmt.Sprintf("%.1f", us(r.p50)),
		fmt.Sprintf("%.3f", r.algbw), fmt.Sprintf("%.3f", r.busbw), strconv.FormatInt(r.wrong, 10)})
}

// line prints cells in the table's columns, as one Write.
func (t *benchTable) line(cells []string) {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteString("  ")
		}
		b.WriteString(strings.Repeat(" ", max(0, t.widths[i]-len(c))))
		b.WriteString(c)
	}
	b.WriteByte('\n')
	_, _ = io.WriteString(t.w, b.String())
}
