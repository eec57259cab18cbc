package cuda

import (
	"context"
	"runtime"
	"time"

	"github.com/choreo-gpu/choreo/internal/spin"
)

// Polling budget shared by every place that watches a word in host-mapped
// memory for the GPU (a CPU fence wait, a queue's completion poller). A
// GPU->CPU store lands in a few microseconds, so watchers first spin
// (spinFor), then sleep in steps that double from minSleep up to maxSleep.
// For the first spinAlone of the spin a watcher keeps its processor; after
// that it yields it every spin.YieldEvery (no watcher is a locked driver
// thread, where runtime.Gosched would hand the thread off).
// Yielding at once would hand the processor to whatever the watcher just
// woke (a fence update kicks the queues' pollers, which the
// runtime queues to run next on the updater's processor) and put the
// watcher at the back of the run queue, microseconds before the GPU's
// store lands; spinning alone first lets an idle processor take the woken
// goroutine instead. The GPU cannot wake a Go goroutine without cgo
// callbacks, so polling is the mechanism; the sleeps bound its CPU cost
// when a wait is long.
const (
	spinFor        = 50 * time.Microsecond
	spinAlone      = 10 * time.Microsecond
	spinYieldEvery = 64 // polls between two looks at the clock
	minSleep       = 4 * time.Microsecond
	maxSleep       = 250 * time.Microsecond
)

// backoff paces one polling loop. The zero value starts in the spin phase.
type backoff struct {
	start, yielded time.Time
	polls          int
	sleep          time.Duration
}

// reset starts a new wait (back to spinning).
func (b *backoff) reset() { *b = backoff{} }

// next returns how long to sleep before the next poll: 0 while spinning.
func (b *backoff) next() time.Duration {
	b.polls++
	if b.start.IsZero() {
		b.start = time.Now()
	}
	if b.sleep == 0 {
		if b.polls%spinYieldEvery == 0 {
			now := time.Now()
			if now.Sub(b.start) >= spinAlone && now.Sub(b.yielded) >= spin.YieldEvery {
				runtime.Gosched()
				b.yielded = now
			}
			if now.Sub(b.start) >= spinFor {
				b.sleep = minSleep
			}
		}
		return 0
	}
	d := b.sleep
	if b.sleep < maxSleep {
		b.sleep = min(2*b.sleep, maxSleep)
	}
	return d
}

// pollWait polls cond until it reports done, ctx is done or cancel is
// closed. It returns cond's error, or errCtx/errCancel for the latter two
// (after one last look at cond). Every wait is bounded by ctx or cancel;
// a caller with neither must pass a context with a deadline.
func pollWait(ctx context.Context, cancel <-chan struct{}, cond func() (bool, error), errCtx func() error, errCancel func() error) error {
	var b backoff
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if ok, err := cond(); ok || err != nil {
			return err
		}
		d := b.next()
		if d == 0 {
			if b.polls%spinYieldEvery == 0 {
				select {
				case <-ctx.Done():
					return lastLook(cond, errCtx)
				case <-cancel:
					return lastLook(cond, errCancel)
				default:
				}
			}
			continue
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return lastLook(cond, errCtx)
		case <-cancel:
			return lastLook(cond, errCancel)
		}
	}
}

func lastLook(cond func() (bool, error), fail func() error) error {
	if ok, err := cond(); ok || err != nil {
		return err
	}
	return fail()
}
