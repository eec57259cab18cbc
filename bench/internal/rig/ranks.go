package rig

import (
	"syscall"
	"time"
)

// Ranks is the rank processes of one group, by rank. Its methods are safe
// for concurrent use as Proc's are.
type Ranks []*Proc

// Kill ends every rank still running and waits for them (up to 10 s each).
func (rs Ranks) Kill() {
	for _, p := range rs {
		_ = p.Signal(syscall.SIGKILL)
	}
	for _, p := range rs {
		p.Wait(10 * time.Second)
	}
}

// WaitAll waits until d has passed for every rank to end; it reports
// whether they all did.
func (rs Ranks) WaitAll(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for _, p := range rs {
		if !p.Wait(time.Until(deadline)) {
			return false
		}
	}
	return true
}

// AwaitAll waits, until d has passed, for a line that match accepts on
// every rank; it returns the lines by rank and true, or the lines so far,
// the first rank without one and false.
func (rs Ranks) AwaitAll(d time.Duration, match func(string) bool) ([]Line, int, bool) {
	deadline := time.Now().Add(d)
	got := make([]Line, len(rs))
	for r, p := range rs {
		l, ok := p.Await(time.Until(deadline), match)
		if !ok {
			return got, r, false
		}
		got[r] = l
	}
	return got, -1, true
}
