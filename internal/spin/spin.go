// Package spin is how choreo's goroutines wait for something that is often
// microseconds away: poll briefly where processors are to spare, yield,
// then park (or, where nothing can wake the waiter, sleep between polls).
//
// A goroutine that parks (on a channel, a lock) and is woken again is
// queued by the Go runtime to run next on its waker's processor, where it
// waits until the waker yields or another processor steals it; a goroutine
// that is still polling when its work arrives needs no wake-up at all.
// Polling takes a processor, so it is worth it only where processors are
// to spare: Budget is zero below 8.
package spin

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// minProcs is the GOMAXPROCS from which Budget allows polling.
const minProcs = 8

// YieldEvery is how often a polling goroutine yields its processor (to a
// goroutine it woke, which the runtime queued behind it). Not more often:
// runtime.Gosched takes the scheduler's global lock, and pollers that
// yield more often contend for it.
const YieldEvery = 5 * time.Microsecond

// clockEvery is how many polls of a timed spin pass between two looks at
// the clock: reading it costs more than a poll.
const clockEvery = 64

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

// Policy is a spin-then-park schedule. A wait on it goes through these
// phases in order, and ends as soon as its condition holds:
//
//   - Polls plain polls (at least one);
//   - polls until Spin has passed since the first of them, looking at the
//     clock every 64 polls. For the first Alone of it (zero: YieldEvery)
//     the poller keeps its processor, so an idle processor rather than
//     the poller's runs what the poller just woke; after that it yields
//     every YieldEvery. With Alone >= Spin it never yields, as a locked OS
//     thread must not (runtime.Gosched would hand the thread off);
//   - Yields polls, each after runtime.Gosched;
//   - then the caller parks (Until reports false, Backoff.Next returns
//     Park), or, where nothing can wake it, sleeps between polls: Sleep
//     at first, doubling up to MaxSleep.
//
// The zero Policy polls once.
type Policy struct {
	Polls           int
	Spin, Alone     time.Duration
	Yields          int
	Sleep, MaxSleep time.Duration
}

// Until polls ready through p's polling phases (never its sleeps) and
// reports ready's last answer: false means the caller should park.
func (p Policy) Until(ready func() bool) bool {
	for range max(p.Polls, 1) { // plain polls need no Backoff
		if ready() {
			return true
		}
	}
	b := Backoff{p: p, n: p.Polls} // its plain polls are done
	for b.Next() == 0 {
		if ready() {
			return true
		}
	}
	return false
}

// Until polls ready until it reports true or d has passed, yielding the
// processor every YieldEvery (to goroutines this one woke), and returns
// ready's last answer. With d <= 0 it asks once. It is Policy{Spin: d}.Until.
func Until(d time.Duration, ready func() bool) bool {
	return Policy{Spin: d}.Until(ready)
}

// Wait polls cond on p's schedule until cond reports done or an error, ctx
// is done or cancel is closed (a nil cancel never is), and returns cond's
// error. When ctx or cancel ends the wait first, it looks at cond once
// more and, if that does not end it either, returns stopped(canceled),
// canceled telling cancel from ctx. Nothing but its own polls ends a wait
// that cond would end, so p should sleep (Sleep > 0): a zero Sleep is
// taken as YieldEvery.
func (p Policy) Wait(ctx context.Context, cancel <-chan struct{}, cond func() (bool, error), stopped func(canceled bool) error) error {
	b := Backoff{p: p}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	lastLook := func(canceled bool) error {
		if ok, err := cond(); ok || err != nil {
			return err
		}
		return stopped(canceled)
	}
	for i := 1; ; i++ {
		if ok, err := cond(); ok || err != nil {
			return err
		}
		d := b.Next()
		if d == 0 {
			if i%clockEvery == 0 {
				select {
				case <-ctx.Done():
					return lastLook(false)
				case <-cancel:
					return lastLook(true)
				default:
				}
			}
			continue
		}
		if d == Park {
			d = YieldEvery
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return lastLook(false)
		case <-cancel:
			return lastLook(true)
		}
	}
}

// Park is what Backoff.Next returns once a Policy without sleeps is over:
// the caller parks until it is woken.
const Park time.Duration = -1

// Backoff paces one polling loop on a Policy, for loops that Until and
// Wait do not fit (a loop with its own wake-up channel). The caller polls,
// and after every poll that found nothing calls Next. Reset starts the
// schedule again (after progress, or a wake-up).
type Backoff struct {
	p       Policy
	phase   phase
	n       int       // polls, or yields, so far in this phase
	start   time.Time // of the timed spin
	yielded time.Time // the timed spin's last yield
	sleep   time.Duration
}

// phase is a Backoff's place in its Policy.
type phase uint8

const (
	polling phase = iota
	spinning
	yielding
	sleeping
)

// Backoff returns a Backoff on p, before its first poll.
func (p Policy) Backoff() Backoff { return Backoff{p: p} }

// Reset starts b's schedule again.
func (b *Backoff) Reset() { *b = Backoff{p: b.p} }

// Next is called after a poll that found nothing. It returns 0 to poll
// again at once (having yielded the processor first where the Policy
// says), how long to sleep before the next poll, or Park.
func (b *Backoff) Next() time.Duration {
	if b.phase == spinning { // the hot path, small enough to inline
		if b.n++; b.n%clockEvery != 0 {
			return 0
		}
	}
	return b.next()
}

// next is Next past the hot path: a timed spin's look at the clock, and
// every change of phase.
func (b *Backoff) next() time.Duration {
	for {
		switch b.phase {
		case polling:
			if b.n++; b.n < b.p.Polls {
				return 0
			}
			b.n = 0
			if b.p.Spin > 0 {
				b.phase, b.start = spinning, time.Now()
				return 0
			}
			b.phase = yielding
		case spinning: // Next counted the poll: look at the clock
			now := time.Now()
			spun := now.Sub(b.start)
			if spun >= b.p.Spin {
				b.phase, b.n = yielding, 0
				continue
			}
			alone := b.p.Alone
			if alone == 0 {
				alone = YieldEvery
			}
			if spun >= alone && now.Sub(b.yielded) >= YieldEvery {
				runtime.Gosched()
				b.yielded = now
			}
			return 0
		case yielding:
			if b.n < b.p.Yields {
				b.n++
				runtime.Gosched()
				return 0
			}
			if b.p.Sleep <= 0 {
				return Park
			}
			b.phase, b.sleep = sleeping, b.p.Sleep
		default: // sleeping
			d := b.sleep
			if b.sleep < b.p.MaxSleep {
				b.sleep = min(2*b.sleep, b.p.MaxSleep)
			}
			return d
		}
	}
}
