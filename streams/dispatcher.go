package streams

import (
	"sync"

	"github.com/choreo-gpu/choreo/internal/spin"
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
	budget := spin.Budget() // poll for the next drain before parking
	go func() {
		for {
			spin.Until(budget, func() bool { return len(d.work) > 0 })
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
