package awake_test

import (
	"testing"

	"github.com/choreo-gpu/choreo/internal/awake"
)

const every = 10

// ticks runs on-time heartbeats from the clock's last one up to end and
// returns the last tick's count of s for a peer last heard at heard.
func ticks(c *awake.Clock, s *awake.Silence, from, end, heard int64) (int64, int64) {
	var q int64
	for now := from + every; now <= end; now += every {
		q = s.Count(c.Tick(now), heard)
	}
	return q, end
}

// TestSilenceCountsAwakeTime: timely heartbeats count a peer's whole
// silence; the interval of a late one (this process stalled) counts
// nothing, and does not restart the count either.
func TestSilenceCountsAwakeTime(t *testing.T) {
	c := awake.New(every, 0)
	var s awake.Silence
	q, now := ticks(c, &s, 0, 100, 0)
	if q != 100 {
		t.Fatalf("silence of a peer last heard at 0, at 100, on time all along: %d; want 100", q)
	}
	tk := c.Tick(now + 1000) // a stall of a thousand
	if tk.OnTime {
		t.Fatal("a tick a thousand after the last (interval 10): on time")
	}
	if q := s.Count(tk, 0); q != 100 {
		t.Fatalf("silence after the stall: %d; want 100 (the stall counts nothing)", q)
	}
	now += 1000
	if q, _ := ticks(c, &s, now, now+50, 0); q != 150 {
		t.Fatalf("silence 50 after the stall: %d; want 150", q)
	}
}

// TestHeardRestartsTheCount: a peer heard during an interval is silent
// only from then; heard during a stall, from the next timely tick.
func TestHeardRestartsTheCount(t *testing.T) {
	c := awake.New(every, 0)
	var s awake.Silence
	ticks(c, &s, 0, 100, 0)
	if q := s.Count(c.Tick(110), 104); q != 6 {
		t.Fatalf("a peer heard at 104, at 110: %d; want 6", q)
	}
	if q := s.Count(c.Tick(500), 300); q != 0 {
		t.Fatalf("a peer heard during a stall, at its late tick: %d; want 0", q)
	}
	if q := s.Count(c.Tick(510), 300); q != 10 {
		t.Fatalf("one interval later: %d; want 10", q)
	}
}

// TestJustInTimeIsOnTime: two intervals exactly is on time.
func TestJustInTimeIsOnTime(t *testing.T) {
	c := awake.New(every, 0)
	if !c.Tick(2 * every).OnTime {
		t.Fatal("a tick two intervals after the start: late")
	}
	if c.Tick(4*every + 1).OnTime {
		t.Fatal("a tick two intervals and one after the last: on time")
	}
}
