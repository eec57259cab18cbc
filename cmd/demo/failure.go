package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/choreo-gpu/choreo/collectives"
)

// printFailure writes the demo's error: a failed collective as its report,
// one block (op, group, sequence number, the rank that failed first and
// why, the ranks that had not arrived), any other error as one line.
func printFailure(w io.Writer, err error) {
	var oe *collectives.OpError
	if !errors.As(err, &oe) {
		fmt.Fprintln(w, "demo:", err)
		return
	}
	fmt.Fprintf(w, "demo: %s\n", oe.Report())
	if err.Error() != oe.Error() {
		fmt.Fprintln(w, "  in:          ", err)
	}
}
