package main

import (
	"strings"
	"testing"
	"time"
)

// TestStepProgress: a run that has gone on long enough prints whole
// progress lines at each tenth of its steps, at most one a second, none
// for the last step; a short run prints none.
func TestStepProgress(t *testing.T) {
	var b strings.Builder
	p := newStepProgress(&b, 100)
	p.done(50) // too soon
	if b.Len() != 0 {
		t.Fatalf("a run of under %v printed %q", progressAfter, b.String())
	}
	p.t0, p.last = p.t0.Add(-3*time.Second), p.last.Add(-3*time.Second)
	p.done(10)
	p.done(11) // same tenth
	p.done(20) // under a second after the last line
	if got := b.String(); !strings.HasPrefix(got, "step 10/100 (10%), 3") || strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, " left\n") {
		t.Fatalf("lines %q, want one for step 10", got)
	}
	p.last = p.last.Add(-2 * time.Second)
	p.done(30)
	p.last = p.last.Add(-2 * time.Second)
	p.done(100) // the end: the summary follows
	if got := b.String(); strings.Count(got, "\n") != 2 || !strings.Contains(got, "\nstep 30/100 (30%), ") {
		t.Errorf("lines %q, want steps 10 and 30", got)
	}
	var none *stepProgress
	none.done(1)
}
