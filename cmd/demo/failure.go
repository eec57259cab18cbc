package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/choreo-gpu/choreo/collectives"
)

// printFailure writes the demo's error. A failed collective is one
// report per failure: where lead (rank 0 of a launch, or a process that
// holds every rank) it is a block (op, group, sequence number, the rank
// that failed first and why, the ranks that had not arrived, what the
// demo was doing); on another launched rank it is one line, the block
// being rank 0's to print. Any other error is one line.
func printFailure(w io.Writer, err error, lead bool) {
	var oe *collectives.OpError
	if !errors.As(err, &oe) {
		fmt.Fprintln(w, "demo:", err)
		return
	}
	if !lead {
		fmt.Fprintf(w, "demo: rank %d: %s (group %d seq %d) failed; failed first: rank %d: %v\n",
			oe.Rank, oe.Op, oe.Group, oe.Seq, oe.Origin, oe.Cause)
		return
	}
	fmt.Fprintf(w, "demo: %s\n", oe.Report())
	if in := doing(err, oe); in != "" {
		fmt.Fprintln(w, "  in:          ", in)
	}
}

// doing is what err says the demo was doing when oe failed: err's
// message up to oe's ("step 0: rank 0: all-reduce"), or "" when it adds
// nothing.
func doing(err error, oe *collectives.OpError) string {
	msg := err.Error()
	i := strings.Index(msg, oe.Error())
	if i < 0 {
		if msg == oe.Error() {
			return ""
		}
		return msg
	}
	return strings.TrimRight(msg[:i], ": ")
}
