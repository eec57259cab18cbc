package spin

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilSeesReadiness(t *testing.T) {
	var flag atomic.Bool
	go func() {
		time.Sleep(time.Millisecond)
		flag.Store(true)
	}()
	if !Until(5*time.Second, flag.Load) {
		t.Fatal("Until returned false although ready became true within its budget")
	}
}

func TestUntilGivesUp(t *testing.T) {
	start := time.Now()
	if Until(200*time.Microsecond, func() bool { return false }) {
		t.Fatal("Until reported ready for a condition that never holds")
	}
	if el := time.Since(start); el < 200*time.Microsecond || el > time.Second {
		t.Fatalf("Until gave up after %v, want about 200us", el)
	}
	calls := 0
	if Until(0, func() bool { calls++; return false }) || calls != 1 {
		t.Fatalf("Until(0) polled %d times, want a single look", calls)
	}
}
