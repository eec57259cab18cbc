package msg

import "time"

// BeatAt runs one heartbeat as if it were now, after a last one at last:
// the tests of the silence rule drive the clock themselves.
func (e *Endpoint) BeatAt(last, now time.Time) {
	e.alive.Tick(last.UnixNano())
	e.beat(now.UnixNano())
}
