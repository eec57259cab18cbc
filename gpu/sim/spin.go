package sim

import "runtime"

// Spinning budget of a waiter before it parks. A parked goroutine takes
// microseconds to wake (futex, scheduler), more than a whole fence round
// trip should cost, so waiters first poll: spinTight plain polls, then
// spinYield polls each after runtime.Gosched, which lets other goroutines
// (often the very one that will write the word) use the processor.
const (
	spinTight = 64
	spinYield = 16
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
