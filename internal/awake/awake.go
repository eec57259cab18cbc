// Package awake keeps a failure detector from blaming its peers for its
// own stalls.
//
// A heartbeat that judges peers by how long ago it last heard them is
// fooled when its own process stops: starved of CPU, swapped out, stopped
// by a debugger or a signal. Its readers did not read what the peers sent
// meanwhile, so a peer that talked all along looks silent. A Clock notices
// such a stall by its heartbeat coming late, and a Silence counts a peer's
// silence only over the intervals between timely heartbeats: a peer is
// judged on time this process was awake to hear it. Stalls do not restart
// the count, so a process that stalls often still finds a dead peer, a
// little later.
package awake

import "sync/atomic"

// Clock is one heartbeat's view of its own process. Tick is called at
// each heartbeat with the current time (any monotonic count of
// nanoseconds, the same for every call and for the times a Silence is
// given); a tick more than two intervals after the one before is late.
// Its methods may be called from any goroutine.
type Clock struct {
	every int64
	last  atomic.Int64
}

// New returns a Clock for a heartbeat of every nanoseconds, started at
// now.
func New(every, now int64) *Clock {
	c := &Clock{every: every}
	c.last.Store(now)
	return c
}

// Tick is one heartbeat: the interval since the one before, and whether
// this process was awake through it.
type Tick struct {
	Prev, Now int64
	OnTime    bool
}

// Tick records a heartbeat at now.
func (c *Clock) Tick(now int64) Tick {
	prev := c.last.Swap(now)
	return Tick{Prev: prev, Now: now, OnTime: now-prev <= 2*c.every}
}

// Silence is how long one peer has been silent, counted over the
// intervals this process was awake. Its zero value is a peer heard at the
// Clock's start; one goroutine (the heartbeat's) uses it.
type Silence struct {
	quiet int64
}

// Count adds heartbeat t to the count, for a peer last heard at heard, and
// returns the silence counted so far: the time since the peer was heard,
// less the intervals of late ticks (stalls), which count nothing.
func (s *Silence) Count(t Tick, heard int64) int64 {
	switch {
	case heard > t.Prev && t.OnTime: // heard during this interval
		s.quiet = max(t.Now-heard, 0)
	case heard > t.Prev:
		s.quiet = 0
	case t.OnTime:
		s.quiet += t.Now - t.Prev
	}
	return s.quiet
}
