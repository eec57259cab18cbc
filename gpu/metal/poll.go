package metal

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// Polling budget of a CPU wait on a fence word. A fence round trip is
// microseconds, so a waiter first spins (pollSpin plain polls), then yields
// (pollYield polls after runtime.Gosched), then sleeps with a backoff that
// doubles from pollSleepMin to pollSleepMax: an idle waiter costs little
// CPU and still sees a change within about pollSleepMax.
const (
	pollSpin     = 64
	pollYield    = 64
	pollSleepMin = time.Microsecond
	pollSleepMax = time.Millisecond
)

// pollUntil calls cond until it reports done or an error, ctx is done (the
// error wraps ctx.Err()) or cancel is closed (it wraps gpu.ErrCanceled).
// what names the wait in errors.
func pollUntil(ctx context.Context, cancel <-chan struct{}, what string, cond func() (bool, error)) error {
	for i := range pollSpin + pollYield {
		if ok, err := cond(); ok || err != nil {
			return err
		}
		if i >= pollSpin {
			runtime.Gosched()
		}
	}
	sleep := pollSleepMin
	t := time.NewTimer(sleep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("metal: %s: %w", what, ctx.Err())
		case <-cancel:
			return fmt.Errorf("metal: %s: %w", what, gpu.ErrCanceled)
		case <-t.C:
		}
		if ok, err := cond(); ok || err != nil {
			return err
		}
		sleep = min(2*sleep, pollSleepMax)
		t.Reset(sleep)
	}
}
