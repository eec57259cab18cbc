package shm

import (
	"os"
	"runtime"
	"sync/atomic"
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
// Polling takes a processor, so it is worth it only where every rank can
// have one: it is on when the host has at least as many CPUs as the group
// has ranks (all on this host), whatever GOMAXPROCS is (a rank of a 2-rank
// group on 2 CPUs runs with GOMAXPROCS 1, and its poller yields to the
// process's other goroutines every spin.YieldEvery). Each wait polls for
// at most the transport's budget, which adapts: a wait that lasted longer
// than the full budget halves it (down to minPoll), a shorter one doubles
// it back (up to maxPoll), so that a rank waiting long on a slow peer
// soon polls little and one whose waits are short again polls through
// them; and a poller that finds it lost its CPU for a while (preemptGap:
// the host has more runnable threads than CPUs, and polling would take
// the CPU a peer needs) drops it to minPoll for calmFor. The variable
// CHOREO_SHM_POLL (a duration; 0 turns polling off) sets the most.
const (
	maxPoll = 200 * time.Microsecond
	minPoll = 10 * time.Microsecond
)

// clockPolls is how many polls of the lane (tens of nanoseconds each)
// pass between two looks at the clock.
const clockPolls = 16

// envPoll is the variable that sets the polling budget.
const envPoll = "CHOREO_SHM_POLL"

// pollBudget returns the most a wait polls, given the group's size.
func pollBudget(size int) time.Duration {
	if v, ok := os.LookupEnv(envPoll); ok {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return d
		}
	}
	if size > 1 && runtime.NumCPU() >= size {
		return maxPoll
	}
	return spin.Budget()
}

// poller is a transport's adaptive polling budget.
type poller struct {
	max, min time.Duration
	cur      atomic.Int64 // the current budget, in nanoseconds
	calm     atomic.Int64 // unix nanos before which cur stays min (preempted)
}

func (q *poller) init(max time.Duration) {
	q.max, q.min = max, min(minPoll, max)
	q.cur.Store(int64(max))
}

// budget is how long the next wait polls.
func (q *poller) budget() time.Duration { return time.Duration(q.cur.Load()) }

// waited adapts the budget to a wait that took d (polling, then parked
// if it must): one that a full budget would have polled through doubles
// it (up to max), a longer one halves it (down to min).
func (q *poller) waited(d time.Duration) {
	c := q.cur.Load()
	switch {
	case d <= q.max && c < int64(q.max):
		if c == int64(q.min) && time.Now().UnixNano() < q.calm.Load() {
			return
		}
		q.cur.Store(min(2*c, int64(q.max)))
	case d > q.max && c > int64(q.min):
		q.cur.Store(max(c/2, int64(q.min)))
	}
}

// preempted drops the budget to min for calmFor: a poller lost its CPU
// to another thread, so this host has more runnable threads than CPUs,
// and polling would take the CPU its peer needs.
func (q *poller) preempted() {
	q.calm.Store(time.Now().Add(calmFor).UnixNano())
	q.cur.Store(int64(q.min))
}

// calmFor is how long a preemption keeps the budget at min.
const calmFor = 50 * time.Millisecond

// preemptGap is the longest a poller may go between two looks at the
// clock (a few microseconds apart when it runs) before it takes itself
// for preempted by the OS. Measured on a 2-CPU virtual machine, a thread
// spinning alone saw gaps over 50 us about 100 times a second (the
// hypervisor's), over 200 us once a second, over 1 ms never; beside two
// busy loops, gaps over 1 ms 90 times a second.
const preemptGap = 200 * time.Microsecond

// pollClock paces one wait's polling: its end, its yields to the
// process's other goroutines, and the detection of preemption.
type pollClock struct {
	end, last, yielded time.Time
}

// more is called between polls, and reports whether the wait may poll
// again: not once budget has passed since the first call, nor after a
// preemption, which it reports to q.
func (k *pollClock) more(q *poller, budget time.Duration) bool {
	now := time.Now()
	if k.end.IsZero() {
		k.end, k.last, k.yielded = now.Add(budget), now, now
		return true
	}
	if now.Sub(k.last) > preemptGap {
		q.preempted()
		return false
	}
	if now.After(k.end) {
		return false
	}
	if now.Sub(k.yielded) >= spin.YieldEvery {
		runtime.Gosched() // what it runs meanwhile is no preemption
		now = time.Now()
		k.yielded = now
	}
	k.last = now
	return true
}

// poll waits for ready by polling p's incoming lane (see Polling), for at
// most the transport's budget, and reports ready's last answer: false
// means the caller should park. The caller tells the budget how long its
// whole wait took (poller.waited). The caller holds p.live.
func (p *peer) poll(ready func() bool) bool {
	if ready() {
		return true
	}
	q := &p.t.poll
	d := q.budget()
	if d <= 0 {
		return false
	}
	in := p.in
	in.polling.Add(1)
	var clock pollClock
	ok := false
	for polls := 0; ; polls++ {
		if p.published() && p.cons.TryLock() {
			p.consume()
			p.cons.Unlock()
		}
		if ok = ready(); ok || (polls%clockPolls == 0 && !clock.more(q, d)) {
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
