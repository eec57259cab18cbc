package shm

import (
	"context"
	"time"

	"github.com/choreo-gpu/choreo/internal/spin"
)

// Polling. A call that waits for its peer polls the incoming lane itself
// for the Endpoint's budget (Peer.Poll) before it parks, consuming what
// the peer publishes on its own goroutine: no doorbell, no hand-off from
// the pump. While a call polls, the lane's polling word tells the sender
// to ring no doorbell; once it stops it consumes what was published
// meanwhile, so nothing waits for a bell that never rang.

// clockPolls is how many polls of the lane pass between two looks at the
// clock.
const clockPolls = 16

// Wait polls the lane first, then parks, looking again whenever the lane
// was read and reading it itself on a timer.
func (l *link) Wait(ctx context.Context, _ int, ready func() bool) {
	if ready() {
		return
	}
	l.Hold(0)
	l.waits.Add(1)
	start := time.Now()
	wakes := l.wakes.Load()
	if !l.poll(ready) {
		l.park(ctx, ready, wakes)
	}
	l.peer.Poll().Waited(time.Since(start))
	l.waits.Add(-1)
	l.Release(0, false)
}

// park is Wait after its poll (wakes: the Wake calls when Wait began).
func (l *link) park(ctx context.Context, ready func() bool, wakes int64) {
	rc := recheck{l: l}
	defer rc.stop()
	for {
		woken := l.waken.C()
		if ready() || l.down.Load() || l.wakes.Load() != wakes {
			return
		}
		select {
		case <-woken:
		case <-ctx.Done():
			return
		case <-rc.C():
			rc.fire()
		}
	}
}

func (l *link) Wake(int) {
	l.wakes.Add(1)
	l.waken.fire()
}

// poll waits for ready by polling the lane for at most the budget, and
// reports ready's last answer.
func (l *link) poll(ready func() bool) bool {
	q := l.peer.Poll()
	d := q.Budget()
	if d <= 0 || !l.enter() {
		return false
	}
	in := l.in
	in.polling.Add(1)
	var clock spin.PollClock
	var err error
	ok := false
	for polls := 0; err == nil; polls++ {
		if l.published() && l.cons.TryLock() {
			_, err = l.consume()
			l.cons.Unlock()
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
	if err == nil {
		err = l.consumeLocked()
	}
	l.leave()
	if err != nil {
		l.fail(err)
	}
	return ok || ready()
}

// consumeLocked consumes what the lane holds, taking cons. The caller is
// between enter and leave.
func (l *link) consumeLocked() error {
	if !l.published() {
		return nil
	}
	l.cons.Lock()
	defer l.cons.Unlock()
	_, err := l.consume()
	return err
}

// A parked call is woken by the pump, which the doorbell wakes through
// the netpoller; a process whose processors are all busy looks at the
// netpoller only every 10 ms or more, while timers run at every
// scheduling point: so a parked call also looks at the lane itself on a
// timer, after recheckMin, then ever less often, up to every recheckMax.
const (
	recheckMin = 100 * time.Microsecond
	recheckMax = 10 * time.Millisecond
)

// recheck is a parked call's timer for looking at the lane (see above).
type recheck struct {
	l *link
	t *time.Timer
	d time.Duration
}

func (r *recheck) C() <-chan time.Time {
	if r.t == nil {
		r.d = recheckMin
		r.t = time.NewTimer(r.d)
	}
	return r.t.C
}

func (r *recheck) fire() {
	l := r.l
	if l.enter() {
		err := l.consumeLocked()
		l.leave()
		if err != nil {
			l.fail(err)
		}
	}
	r.d = min(2*r.d, recheckMax)
	r.t.Reset(r.d)
}

func (r *recheck) stop() {
	if r.t != nil {
		r.t.Stop()
	}
}
