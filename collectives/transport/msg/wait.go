package msg

import (
	"context"
	"sync/atomic"
	"time"
)

// spuriousMax is how many times in a row a link's Wait may return with
// nothing ready (a Wake for another operation, a loss not declared yet)
// before the waiter sleeps spuriousSleep between Waits.
const (
	spuriousMax   = 3
	spuriousSleep = time.Millisecond
)

// waiter paces one operation's calls of its link's Wait.
type waiter struct{ spurious int }

// wait calls the link's Wait, with waiting set meanwhile (so that whoever
// ends the operation wakes the lane).
func (w *waiter) wait(ctx context.Context, p *Peer, lane int, waiting *atomic.Bool, ready func() bool) {
	if w.spurious >= spuriousMax {
		t := time.NewTimer(spuriousSleep)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	waiting.Store(true)
	p.link.Wait(ctx, lane, ready)
	waiting.Store(false)
	if ready() || ctx.Err() != nil {
		w.spurious = 0
	} else {
		w.spurious++
	}
}
