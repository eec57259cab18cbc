package streams

import (
	"context"
	"fmt"

	"github.com/choreo-gpu/choreo/internal/spin"
)

// Event marks a point on a GPU stream: it is done once every command
// enqueued on the stream up to and including the one that produced it has
// completed. The zero Event has no stream and is always done (a value that
// was ready when it was made).
type Event struct {
	s   *GPU
	seq uint64
}

// Stream returns the stream the event belongs to (nil for the zero Event).
func (e Event) Stream() *GPU { return e.s }

// Valid reports whether e names a point on a stream.
func (e Event) Valid() bool { return e.s != nil }

// Done reports whether the event has completed.
func (e Event) Done() bool { return e.s == nil || e.s.completed.Load() >= e.seq }

// Wait blocks until the event completes or ctx is done. It polls briefly
// (internal/spin) and yields a few times before parking, so a completion
// that is microseconds away costs no wake-up. Errors wrap ctx.Err() or
// ErrClosed when the stream closed with the event unfinished.
func (e Event) Wait(ctx context.Context) error { return e.WaitUntil(ctx, nil) }

// WaitUntil is Wait that also returns nil as soon as stop is closed (a nil
// stop never is); the caller tells the two outcomes apart, as Array.Wait
// does for an array that failed while its event was still pending.
func (e Event) WaitUntil(ctx context.Context, stop <-chan struct{}) error {
	over := func() bool { return e.Done() || closed(stop) }
	if (spin.Policy{Spin: spin.Budget(), Yields: 8}).Until(over) {
		return nil
	}
	e.s.parked.Add(1) // before the last look, so complete sees it (see GPU.complete)
	defer e.s.parked.Add(-1)
	for {
		ch := e.s.progress.Load()
		if over() {
			return nil
		}
		select {
		case <-*ch:
		case <-stop:
			return nil
		case <-e.s.dead:
			if e.Done() {
				return nil
			}
			return fmt.Errorf("streams: wait for event %d on %s: %w", e.seq, e.s.name, ErrClosed)
		case <-ctx.Done():
			return fmt.Errorf("streams: wait for event %d on %s: %w", e.seq, e.s.name, ctx.Err())
		}
	}
}

// closed reports whether ch is closed; a nil ch never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
