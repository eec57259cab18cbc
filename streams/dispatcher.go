package streams

import (
	"runtime"
	"sync"
	"time"
)

// ownDispatcher runs an actor's mailbox on one long-lived goroutine instead
// of protoactor's default goroutine per mailbox activation. A stream actor
// is woken for every command or task; a fresh goroutine each time starts
// on a small stack and grows it again for every comm task (measured: a
// fifth of a small all-reduce's CPU time went to stack copying). The
// mailbox schedules at most one drain at a time, so the queue never holds
// more than one pending drain and Schedule does not block. After stop, the
// goroutine ends and drains fall back to a goroutine each, as protoactor's
// default dispatcher does, so a late system message is still processed.
type ownDispatcher struct {
	work chan func()
	quit chan struct{}
	once sync.Once
}

func newOwnDispatcher() *ownDispatcher {
	d := &ownDispatcher{work: make(chan func(), 4), quit: make(chan struct{})}
	spin := idleSpin()
	go func() {
		for {
			if spin > 0 {
				d.spin(spin)
			}
			select {
			case fn := <-d.work:
				fn()
			case <-d.quit:
				return
			}
		}
	}()
	return d
}

// idleSpin is how long an idle dispatcher polls for its next drain before
// it parks, given the processors this process may use. A drain scheduled
// onto a parked goroutine makes the runtime queue it to run next on the
// scheduling goroutine's processor, where it waits until that goroutine
// yields or another processor steals it, which takes tens of microseconds
// (measured on the H200 host: the second rank's comm task of a 2-rank
// all-reduce started 20 us after it was queued). A dispatcher that is still
// polling picks the drain up at once. Polling costs a processor for up to
// idleSpin after each drain, so it is done only where processors are to
// spare (8 or more); with fewer, a spinning dispatcher would take the
// processor from the goroutines doing the work.
func idleSpin() time.Duration {
	if runtime.GOMAXPROCS(0) >= 8 {
		return 50 * time.Microsecond
	}
	return 0
}

// spin polls for a scheduled drain for up to d, yielding the processor now
// and then to goroutines this one woke.
func (d *ownDispatcher) spin(limit time.Duration) {
	start := time.Now()
	for i := 1; len(d.work) == 0; i++ {
		if i%64 == 0 {
			if time.Since(start) > limit {
				return
			}
			runtime.Gosched()
		}
	}
}

// Schedule implements actor.Dispatcher.
func (d *ownDispatcher) Schedule(fn func()) {
	select {
	case <-d.quit:
		go fn()
	default:
		select {
		case d.work <- fn:
		case <-d.quit:
			go fn()
		}
	}
}

// Throughput implements actor.Dispatcher: messages per drain before the
// mailbox yields.
func (d *ownDispatcher) Throughput() int { return 300 }

// stop ends the goroutine; drains scheduled but not started run on their
// own goroutines.
func (d *ownDispatcher) stop() {
	d.once.Do(func() {
		close(d.quit)
		for {
			select {
			case fn := <-d.work:
				go fn()
			default:
				return
			}
		}
	})
}
