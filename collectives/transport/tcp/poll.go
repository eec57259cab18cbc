package tcp

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/choreo-gpu/choreo/internal/spin"
)

// Polling. A Recv that reads its connection itself (readFor) first polls
// the socket with reads that do not wait, for a while, before it blocks in
// the netpoller: a message that arrives while it polls is read at once,
// with no wake-up of a parked thread (the netpoller's, and the kernel's
// wake-up of a sleeping reader, which the sender's write pays for on
// loopback), which on small messages is most of their latency.
//
// Polling takes a processor, so it is worth it only where every rank of
// this host can have one: it is on when the host has at least as many
// CPUs as the group has ranks on this host (Addrs with this rank's host),
// whatever GOMAXPROCS is (ranks of 2 on 2 CPUs run with GOMAXPROCS 1; the
// poller yields to its process's other goroutines every spin.YieldEvery).
// Each wait polls for at most the transport's budget, which adapts: a wait
// that lasted longer than the full budget halves it (down to minPoll), a
// shorter one doubles it back (up to maxPoll), so that a rank waiting long
// on a slow peer soon polls little and one whose waits are short again
// polls through them; and a poller that finds it lost its CPU for a while
// (preemptGap: the host has more runnable threads than CPUs, and polling
// would take the CPU a peer needs) drops it to minPoll for calmFor. The
// variable CHOREO_TCP_POLL (a duration; 0 turns polling off) sets the
// most.
const (
	maxPoll = 200 * time.Microsecond
	minPoll = 10 * time.Microsecond
)

// envPoll is the variable that sets the polling budget.
const envPoll = "CHOREO_TCP_POLL"

// pollBudget returns the most a wait polls for cfg's rank.
func pollBudget(cfg Config) time.Duration {
	if v, ok := os.LookupEnv(envPoll); ok {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return d
		}
	}
	local := 0
	if cfg.Rank < len(cfg.Addrs) {
		me, _, err := net.SplitHostPort(cfg.Addrs[cfg.Rank])
		for _, a := range cfg.Addrs {
			if h, _, e := net.SplitHostPort(a); err == nil && e == nil && h == me {
				local++
			}
		}
	}
	if local > 1 && runtime.NumCPU() >= local {
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

// errWouldBlock is a read that does not wait finding nothing to read.
var errWouldBlock = errors.New("tcp: read would block")

// read reads c's socket into b: at once (errWouldBlock when nothing is
// there) while c.nowait is set, else waiting in the netpoller.
func (c *conn) read(b []byte) (int, error) {
	if !c.nowait || c.rc == nil {
		return c.nc.Read(b)
	}
	var n int
	var err error
	cerr := c.rc.Read(func(fd uintptr) bool {
		n, err = syscall.Read(int(fd), b)
		return true
	})
	switch {
	case cerr != nil: // a deadline (a kick), a closed connection
		return 0, cerr
	case err == syscall.EAGAIN || err == syscall.EINTR:
		return 0, errWouldBlock
	case err != nil:
		return 0, os.NewSyscallError("read", err)
	case n == 0 && len(b) > 0:
		return 0, io.EOF
	}
	return n, nil
}

// tryWrite writes b if the socket takes it at once, without waiting, and
// returns the bytes it took (0 where it would wait or has no raw
// descriptor; an error is left to the ordinary write that follows).
func (c *conn) tryWrite(b []byte) int {
	if c.rc == nil {
		return 0
	}
	n := 0
	_ = c.rc.Write(func(fd uintptr) bool {
		k, err := syscall.Write(int(fd), b)
		if err == nil && k > 0 {
			n = k
		}
		return true
	})
	return n
}
