//go:build linux

package cuda

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

var _ gpu.CommandTimer = (*Device)(nil)

// TimeCommands implements gpu.CommandTimer: it issues cmds reps times,
// back to back, on a stream of its own, with a CUDA event recorded before
// the first run and after each, and returns the shortest time between two
// consecutive events (the GPU's own clock: no launch on the CPU, no
// completion notice). The buffers and tables cmds name must stay alive
// until it returns; it waits for the stream within ctx.
func (d *Device) TimeCommands(ctx context.Context, cmds []gpu.Command, reps int) (best time.Duration, err error) {
	if ctx == nil || reps < 1 || len(cmds) == 0 {
		return 0, badArgf("time commands: nil context, %d reps or %d commands", reps, len(cmds))
	}
	if err := gpu.ValidateBatch(cmds); err != nil {
		return 0, fmt.Errorf("cuda: time commands: %w", err)
	}
	rs, err := d.NewRawStream()
	if err != nil {
		return 0, fmt.Errorf("cuda: time commands: %w", err)
	}
	defer func() { err = errors.Join(err, rs.Destroy()) }()
	events := make([]cuEvent, 0, reps+1)
	defer func() {
		_ = rs.use("time: destroy events", func(a *api, _ cuStream) error {
			for _, e := range events {
				a.cuEventDestroy(e)
			}
			return nil
		})
	}()
	err = rs.use("time", func(a *api, s cuStream) error {
		for range reps + 1 {
			var e cuEvent
			if err := a.errorf("cuEventCreate", a.cuEventCreate(&e, eventDefault)); err != nil {
				return err
			}
			events = append(events, e)
		}
		if err := a.errorf("cuEventRecord", a.cuEventRecord(events[0], s)); err != nil {
			return err
		}
		for i := range reps {
			for _, c := range cmds {
				if _, err := issueOn(d, s, c); err != nil {
					return err
				}
			}
			if err := a.errorf("cuEventRecord", a.cuEventRecord(events[i+1], s)); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = rs.Synchronize(ctx)
	}
	if err != nil {
		return 0, fmt.Errorf("cuda: time commands: %w", err)
	}
	best = time.Duration(1<<63 - 1)
	err = rs.use("time: elapsed", func(a *api, _ cuStream) error {
		for i := range reps {
			var ms float32
			if err := a.errorf("cuEventElapsedTime", a.cuEventElapsedTime(&ms, events[i], events[i+1])); err != nil {
				return err
			}
			best = min(best, time.Duration(float64(ms)*float64(time.Millisecond)))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cuda: time commands: %w", err)
	}
	return best, nil
}
