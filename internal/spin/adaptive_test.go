package spin

import (
	"testing"
	"time"
)

// TestAdaptiveBudget: a wait longer than the budget halves it down to the
// least, a short one doubles it back up to the most, and a preemption
// drops it to the least until calmFor has passed; a budget of 0 stays 0.
func TestAdaptiveBudget(t *testing.T) {
	var q Adaptive
	q.Init(MaxPoll)
	if q.Budget() != MaxPoll {
		t.Fatalf("budget %v, want %v", q.Budget(), MaxPoll)
	}
	for range 10 {
		q.Waited(time.Millisecond)
	}
	if q.Budget() != MinPoll {
		t.Fatalf("after long waits: budget %v, want %v", q.Budget(), MinPoll)
	}
	for range 10 {
		q.Waited(time.Microsecond)
	}
	if q.Budget() != MaxPoll {
		t.Fatalf("after short waits: budget %v, want %v", q.Budget(), MaxPoll)
	}
	q.Preempted()
	q.Waited(time.Microsecond)
	if q.Budget() != MinPoll {
		t.Fatalf("short wait right after a preemption: budget %v, want %v", q.Budget(), MinPoll)
	}
	q.calm.Store(time.Now().Add(-time.Second).UnixNano())
	q.Waited(time.Microsecond)
	if q.Budget() != 2*MinPoll {
		t.Fatalf("short wait once calm: budget %v, want %v", q.Budget(), 2*MinPoll)
	}
	var off Adaptive
	off.Init(0)
	off.Waited(time.Microsecond)
	off.Waited(time.Second)
	if off.Budget() != 0 {
		t.Fatalf("polling off: budget %v", off.Budget())
	}
}

// TestPollBudgetEnv: the variable sets the budget, 0 turns polling off,
// and a lone rank never polls more than Budget().
func TestPollBudgetEnv(t *testing.T) {
	t.Setenv("CHOREO_TEST_POLL", "37us")
	if d := PollBudget("CHOREO_TEST_POLL", 2); d != 37*time.Microsecond {
		t.Fatalf("with the variable: %v", d)
	}
	t.Setenv("CHOREO_TEST_POLL", "0")
	if d := PollBudget("CHOREO_TEST_POLL", 2); d != 0 {
		t.Fatalf("with 0: %v", d)
	}
	if d := PollBudget("CHOREO_TEST_UNSET_POLL", 1); d != Budget() {
		t.Fatalf("one local rank: %v, want %v", d, Budget())
	}
}
