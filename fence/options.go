package fence

import (
	"time"

	"github.com/choreo-gpu/choreo/trace"
)

// config holds the Manager's settings.
type config struct {
	deadline time.Duration // default fence lifetime
	tick     time.Duration // watchdog period
	poolSize int           // word pairs kept ready per device
}

// ManagerOption configures a Manager.
type ManagerOption func(*config)

// WithDefaultDeadline sets how long a fence may live when New is given no
// deadline (default one minute).
func WithDefaultDeadline(d time.Duration) ManagerOption {
	return func(c *config) {
		if d > 0 {
			c.deadline = d
		}
	}
}

// WithWatchdogPeriod sets how often the watchdog looks for fences past their
// deadline (default 10 ms).
func WithWatchdogPeriod(d time.Duration) ManagerOption {
	return func(c *config) {
		if d > 0 {
			c.tick = d
		}
	}
}

// WithPoolSize sets how many word pairs per device the fence actor keeps
// ready, so New needs no actor round trip (default 32).
func WithPoolSize(n int) ManagerOption {
	return func(c *config) {
		if n > 0 {
			c.poolSize = n
		}
	}
}

// fenceConfig holds one fence's settings.
type fenceConfig struct {
	deadline  time.Time
	name      string
	noCleanup bool
	rec       *trace.Recorder
	track     string
}

// Option configures one fence.
type Option func(*fenceConfig)

// WithDeadline makes the watchdog release the fence at t, so
// no wait on it outlives t.
func WithDeadline(t time.Time) Option { return func(c *fenceConfig) { c.deadline = t } }

// WithTimeout makes the watchdog release the fence d from now.
func WithTimeout(d time.Duration) Option {
	return func(c *fenceConfig) { c.deadline = time.Now().Add(d) }
}

// WithName labels the fence in logs and errors.
func WithName(name string) Option { return func(c *fenceConfig) { c.name = name } }

// WithoutCleanup leaves out the safety net that releases a handle dropped
// without Release (runtime.AddCleanup, a fifth of New's cost). For callers
// that end the fence on every path themselves, as the collectives do: their
// comm task's done callback runs exactly once, whatever happens. The
// watchdog and the runtime's Close still release it.
func WithoutCleanup() Option { return func(c *fenceConfig) { c.noCleanup = true } }

// WithTrace records the fence's CPU-side waits and updates, with their
// values, on track (the comm stream that makes them) of r, and its failure;
// the GPU side's commands show on their stream's track when that stream is
// traced. A nil r records nothing.
func WithTrace(r *trace.Recorder, track string) Option {
	return func(c *fenceConfig) { c.rec, c.track = r, track }
}
