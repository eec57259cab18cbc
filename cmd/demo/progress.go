package main

import (
	"fmt"
	"io"
	"time"
)

// Progress lines: when.
const (
	// progressAfter is how long a run goes before it prints progress: a
	// shorter run prints none.
	progressAfter = 2 * time.Second
	// progressEvery is the longest a long run stays silent.
	progressEvery = 30 * time.Second
)

// stepProgress prints the lead's progress as whole lines ("step 20/200
// (10%), 12.3 s, about 110 s left"), where a progress bar cannot be drawn:
// a launched rank's output reaches the terminal through its launcher, line
// by line. A line comes at each tenth of the steps, once the run has gone
// on for progressAfter, at least every progressEvery and at most once a
// second. A nil
// *stepProgress prints nothing.
type stepProgress struct {
	w     io.Writer
	steps int
	t0    time.Time
	last  time.Time // the last line, or t0
	tenth int       // the last tenth printed
}

func newStepProgress(w io.Writer, steps int) *stepProgress {
	now := time.Now()
	return &stepProgress{w: w, steps: steps, t0: now, last: now}
}

// done says that step k (from 1) has finished.
func (p *stepProgress) done(k int) {
	if p == nil || k >= p.steps {
		return
	}
	now := time.Now()
	elapsed := now.Sub(p.t0)
	tenth := 10 * k / p.steps
	since := now.Sub(p.last)
	if elapsed < progressAfter || tenth == p.tenth && since < progressEvery || p.last != p.t0 && since < time.Second {
		return
	}
	p.tenth, p.last = tenth, now
	left := time.Duration(float64(elapsed) * float64(p.steps-k) / float64(k))
	fmt.Fprintf(p.w, "step %d/%d (%d%%), %s, about %s left\n", k, p.steps, 100*k/p.steps,
		elapsed.Round(100*time.Millisecond), left.Round(time.Second))
}
