// Package spin is how choreo's goroutines poll briefly before they park.
//
// A goroutine that parks (on a channel, a lock) and is woken again is
// queued by the Go runtime to run next on its waker's processor, where it
// waits until the waker yields or another processor steals it. On the
// H200 host that cost tens of microseconds per hand-off (a 2-rank
// all-reduce's second comm task started 20 us after it was queued). A
// goroutine that is still polling when its work arrives needs no wake-up
// at all. Polling takes a processor, so it is worth it only where
// processors are to spare: Budget is zero below 8.
package spin

import (
	"runtime"
	"sync"
	"time"
)

// minProcs is the GOMAXPROCS from which Budget allows polling.
const minProcs = 8

// YieldEvery is how often a polling goroutine yields its processor (to a
// goroutine it woke, which the runtime queued behind it). Not more often:
// runtime.Gosched takes the scheduler's global lock, and a dozen pollers
// yielding every microsecond spent a third of a 2-rank all-reduce's CPU
// time contending for it (profiled on the H200 host).
const YieldEvery = 5 * time.Microsecond

// Budget returns how long a goroutine about to park should poll first: 50
// us where GOMAXPROCS was 8 or more at the first call, else zero. It is
// read once because runtime.GOMAXPROCS takes the scheduler's global lock,
// and Budget is called on hot paths (every event and transport wait).
var Budget = sync.OnceValue(func() time.Duration {
	if runtime.GOMAXPROCS(0) >= minProcs {
		return 50 * time.Microsecond
	}
	return 0
})

// Until polls ready until it reports true or d has passed, yielding the
// processor every YieldEvery (to goroutines this one woke), and returns
// ready's last answer. With d <= 0 it asks once.
func Until(d time.Duration, ready func() bool) bool {
	if ready() {
		return true
	}
	if d <= 0 {
		return false
	}
	start := time.Now()
	last := start
	for i := 1; ; i++ {
		if ready() {
			return true
		}
		if i%64 == 0 {
			now := time.Now()
			if now.Sub(start) > d {
				return false
			}
			if now.Sub(last) >= YieldEvery {
				runtime.Gosched()
				last = now
			}
		}
	}
}
