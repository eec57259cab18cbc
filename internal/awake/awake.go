// Package awake keeps a failure detector from blaming its peers for its
// own stalls.
//
// A heartbeat that judges peers by how long ago it last heard them is
// fooled when its own process stops: starved of CPU, swapped out, stopped
// by a debugger or a signal. Its readers did not read what the peers sent
// meanwhile, so a peer that talked all along looks silent. A Clock notices
// such a stall by its heartbeat coming late, and counts a peer's silence
// only from the heartbeat after the stall on: a peer is judged only on
// time this process was awake to hear it.
package awake

import "sync/atomic"

// Clock is one heartbeat's view of its own process. Tick is called at
// each heartbeat with the current time (any monotonic count of
// nanoseconds, the same for every call and for the times Silent is
// given); a tick more than two intervals after the one before is late,
// and the silence of every peer counts from it. Its methods may be called
// from any goroutine.
type Clock struct {
	every int64
	last  atomic.Int64 // the last tick
	since atomic.Int64 // the last late tick (or the start)
}

// New returns a Clock for a heartbeat of every nanoseconds, started at
// now.
func New(every, now int64) *Clock {
	c := &Clock{every: every}
	c.last.Store(now)
	c.since.Store(now)
	return c
}

// Tick records a heartbeat at now and reports whether it came on time (a
// late one ends a stall: silence counts from it on).
func (c *Clock) Tick(now int64) bool {
	if now-c.last.Swap(now) <= 2*c.every {
		return true
	}
	c.since.Store(now)
	return false
}

// Silent is how long a peer last heard at heard has been silent at now,
// counting only the time since this process last stalled.
func (c *Clock) Silent(now, heard int64) int64 {
	return now - max(heard, c.since.Load())
}
