package shm

import (
	"time"

	"github.com/choreo-gpu/choreo/internal/spin"
)

// Polling. A call that waits for its peer (a Recv for its message, a
// rendezvous Send for its clear-to-send) polls the incoming lane itself
// for a while before it parks: it consumes what the peer publishes on its
// own goroutine (taking the consumer's lock from the pump), so that a
// message needs neither a doorbell (a system call on the sender, a wake-up
// of the pump's thread through the netpoller) nor a hand-off from the pump
// to the call. While a call polls, the lane's polling word tells the
// sender to ring no doorbell; once the call stops it consumes what was
// published meanwhile, so nothing waits for a bell that never rang.
//
// Polling takes a processor: spin.PollBudget says where it is on and
// spin.Adaptive adapts each wait's budget (the same policy as the tcp
// transport's). The variable CHOREO_SHM_POLL (a duration; 0 turns polling
// off) sets the most.
const envPoll = "CHOREO_SHM_POLL"

// clockPolls is how many polls of the lane (tens of nanoseconds each)
// pass between two looks at the clock.
const clockPolls = 16

// poll waits for ready by polling p's incoming lane (see Polling), for at
// most the transport's budget, and reports ready's last answer: false
// means the caller should park. The caller tells the budget how long its
// whole wait took (poller.waited). The caller holds p.live.
func (p *peer) poll(ready func() bool) bool {
	if ready() {
		return true
	}
	q := &p.t.poll
	d := q.Budget()
	if d <= 0 {
		return false
	}
	in := p.in
	in.polling.Add(1)
	var clock spin.PollClock
	ok := false
	for polls := 0; ; polls++ {
		if p.published() && p.cons.TryLock() {
			p.consume()
			p.cons.Unlock()
		}
		if ok = ready(); ok || (polls%clockPolls == 0 && !clock.More(q, d)) {
			break
		}
	}
	in.polling.Add(^uint32(0))
	// A sender that saw this poller rang no bell: consume what it
	// published (the sender stores head, then loads polling; this side the
	// other way round: one of them sees the other's store). Lock, not
	// TryLock: a poller that holds the lock may have looked at head
	// before the publication.
	if p.published() {
		p.cons.Lock()
		p.consume()
		p.cons.Unlock()
	}
	return ok || ready()
}

// consume processes what p's lane holds: control entries, then slots.
// p.cons is held.
func (p *peer) consume() {
	if p.down.Load() {
		return
	}
	p.control()
	p.slots()
}

// A call that parked after polling is woken by the pump, which the
// sender's doorbell wakes through the netpoller. A process whose processors
// are all busy (GOMAXPROCS 1 and another goroutine runnable) looks at the
// netpoller only when it runs out of work, or every 10 ms or more (the
// runtime's sysmon), while timers run at every scheduling point: so a
// parked call also looks at the lane itself on a timer, after recheckMin,
// then ever less often, up to every recheckMax.
const (
	recheckMin = 100 * time.Microsecond
	recheckMax = 10 * time.Millisecond
)

// recheck is a parked call's timer for looking at the lane (see above).
type recheck struct {
	p *peer
	t *time.Timer
	d time.Duration
}

// C is the channel to wait on beside the call's own; the timer starts at
// the first call.
func (r *recheck) C() <-chan time.Time {
	if r.t == nil {
		r.d = recheckMin
		r.t = time.NewTimer(r.d)
	}
	return r.t.C
}

// fire consumes what the lane holds and sets the timer for the next look.
// The caller holds r.p.live.
func (r *recheck) fire() {
	p := r.p
	if p.published() {
		p.cons.Lock()
		p.consume()
		p.cons.Unlock()
	}
	r.d = min(2*r.d, recheckMax)
	r.t.Reset(r.d)
}

// stop releases the timer.
func (r *recheck) stop() {
	if r.t != nil {
		r.t.Stop()
	}
}
