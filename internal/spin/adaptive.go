package spin

import (
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

// Adaptive polling: the data planes' calls that wait for a peer poll for
// a while before they park (the shm transport its lane, the tcp one its
// socket). Polling takes a processor, so it is worth it only where every
// rank of the host can have one (PollBudget). Each wait polls for at most
// an Adaptive budget: a wait that lasted longer than the full budget
// halves it (down to MinPoll), a shorter one doubles it back (up to the
// most), so that a rank waiting long on a slow peer soon polls little and
// one whose waits are short again polls through them; and a poller that
// finds it lost its CPU for a while (preemptGap: the host has more runnable
// threads than CPUs, and polling would take the CPU a peer needs) drops it
// to MinPoll for calmFor.
const (
	MaxPoll = 200 * time.Microsecond
	MinPoll = 10 * time.Microsecond
)

// PollBudget is the most a wait of a transport polls: the duration in the
// variable env if set (0 turns polling off), else MaxPoll where the host
// has at least as many CPUs as there are ranks on it (localRanks > 1),
// whatever GOMAXPROCS is (the poller yields to its process's other
// goroutines every YieldEvery), else Budget().
func PollBudget(env string, localRanks int) time.Duration {
	if v, ok := os.LookupEnv(env); ok {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return d
		}
	}
	if localRanks > 1 && runtime.NumCPU() >= localRanks {
		return MaxPoll
	}
	return Budget()
}

// Adaptive is a transport's adaptive polling budget (see above); its
// methods are safe for concurrent use.
type Adaptive struct {
	max, min time.Duration
	cur      atomic.Int64 // the current budget, in nanoseconds
	calm     atomic.Int64 // unix nanos before which cur stays min (preempted)
}

// Init sets the most (and the current budget) to max.
func (q *Adaptive) Init(max time.Duration) {
	q.max, q.min = max, min(MinPoll, max)
	q.cur.Store(int64(max))
}

// Budget is how long the next wait polls.
func (q *Adaptive) Budget() time.Duration { return time.Duration(q.cur.Load()) }

// Waited adapts the budget to a wait that took d (polling, then parked if
// it must): one that a full budget would have polled through doubles it
// (up to the most), a longer one halves it (down to MinPoll).
func (q *Adaptive) Waited(d time.Duration) {
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

// Preempted drops the budget to MinPoll for calmFor: a poller lost its CPU
// to another thread.
func (q *Adaptive) Preempted() {
	q.calm.Store(time.Now().Add(calmFor).UnixNano())
	q.cur.Store(int64(q.min))
}

// calmFor is how long a preemption keeps the budget at MinPoll.
const calmFor = 50 * time.Millisecond

// preemptGap is the longest a poller may go between two looks at the
// clock (a few microseconds apart when it runs) before it takes itself
// for preempted by the OS. Measured on a 2-CPU virtual machine, a thread
// spinning alone saw gaps over 50 us about 100 times a second (the
// hypervisor's), over 200 us once a second, over 1 ms never; beside two
// busy loops, gaps over 1 ms 90 times a second.
const preemptGap = 200 * time.Microsecond

// PollClock paces one wait's polling: its end, its yields to the
// process's other goroutines, and the detection of preemption. Its zero
// value starts at the first More.
type PollClock struct {
	end, last, yielded time.Time
}

// More is called between polls, and reports whether the wait may poll
// again: not once budget has passed since the first call, nor after a
// preemption, which it reports to q.
func (k *PollClock) More(q *Adaptive, budget time.Duration) bool {
	now := time.Now()
	if k.end.IsZero() {
		k.end, k.last, k.yielded = now.Add(budget), now, now
		return true
	}
	if now.Sub(k.last) > preemptGap {
		q.Preempted()
		return false
	}
	if now.After(k.end) {
		return false
	}
	if now.Sub(k.yielded) >= YieldEvery {
		runtime.Gosched() // what it runs meanwhile is no preemption
		now = time.Now()
		k.yielded = now
	}
	k.last = now
	return true
}
