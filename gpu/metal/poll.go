package metal

import (
	"context"
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// waitSpin is how a CPU wait on a fence word polls: nothing wakes it when
// the GPU signals, and a fence round trip is microseconds, so it first
// polls 64 times, then 64 times after runtime.Gosched, then sleeps in
// steps that double from 1 us up to 1 ms: an idle waiter costs little CPU
// and still sees a change within about a millisecond.
var waitSpin = spin.Policy{Polls: 64, Yields: 64, Sleep: time.Microsecond, MaxSleep: time.Millisecond}

// pollUntil calls cond until it reports done or an error, ctx is done (the
// error wraps ctx.Err()) or cancel is closed (it wraps gpu.ErrCanceled).
// what names the wait in errors.
func pollUntil(ctx context.Context, cancel <-chan struct{}, what string, cond func() (bool, error)) error {
	return waitSpin.Wait(ctx, cancel, cond, func(canceled bool) error {
		if canceled {
			return fmt.Errorf("metal: %s: %w", what, gpu.ErrCanceled)
		}
		return fmt.Errorf("metal: %s: %w", what, ctx.Err())
	})
}
