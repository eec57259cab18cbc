package awake_test

import (
	"testing"

	"github.com/choreo-gpu/choreo/internal/awake"
)

// TestSilenceCountsFromTheLastStall: on-time ticks count a peer's whole
// silence; a late tick (this process stalled) restarts it, so that a peer
// is judged only on time this process was awake to hear it.
func TestSilenceCountsFromTheLastStall(t *testing.T) {
	const every = 10
	c := awake.New(every, 0)
	for now := int64(every); now <= 100; now += every {
		if !c.Tick(now) {
			t.Fatalf("tick at %d after one at %d: late", now, now-every)
		}
	}
	if s := c.Silent(100, 0); s != 100 {
		t.Fatalf("silence of a peer last heard at 0, at 100: %d; want 100", s)
	}
	if c.Tick(100 + 2*every + 1) {
		t.Fatal("a tick more than two intervals late: on time")
	}
	late := int64(100 + 2*every + 1)
	if s := c.Silent(late, 0); s != 0 {
		t.Fatalf("silence at the late tick: %d; want 0", s)
	}
	if !c.Tick(late + every) {
		t.Fatal("the tick after a late one: late")
	}
	if s := c.Silent(late+every, 0); s != every {
		t.Fatalf("silence one interval after the stall: %d; want %d", s, every)
	}
	if s := c.Silent(late+every, late+5); s != every-5 {
		t.Fatalf("silence of a peer heard after the stall: %d; want %d", s, every-5)
	}
}

// TestJustInTimeIsOnTime: two intervals exactly is on time; the boundary
// does not move with how often ticks come.
func TestJustInTimeIsOnTime(t *testing.T) {
	c := awake.New(10, 0)
	if !c.Tick(20) {
		t.Fatal("a tick two intervals after the start: late")
	}
	if c.Tick(41) {
		t.Fatal("a tick 21 after one at 20 (interval 10): on time")
	}
}
