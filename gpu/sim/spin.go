package sim

import "runtime"

// Spinning budget of a waiter before it parks. A parked goroutine takes
// microseconds to wake (futex, scheduler), more than a whole fence round
// trip should cost, so waiters first poll: spinTight plain polls, then
// spinYield polls each after runtime.Gosched, which lets other goroutines
// (often the very one that will write the word) use the processor. The
// budget is small on purpose: with more goroutines than cores (4 ranks on
// 2 cores: 4 queues, 4 comm and 4 stream goroutines), waiters that spin
// longer take the processor from the ones doing the work (measured: 4-rank
// 4 KiB all-reduce p50 55 us with 64+16 polls, 31 us with 16+4; the fence
// round trip went from 1.2 to 1.1 us).
const (
	spinTight = 16
	spinYield = 4
)

// spinUntil polls cond for a short while and reports whether it came true.
func spinUntil(cond func() bool) bool {
	for range spinTight {
		if cond() {
			return true
		}
	}
	for range spinYield {
		runtime.Gosched()
		if cond() {
			return true
		}
	}
	return false
}
