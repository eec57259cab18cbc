package metal

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// Name is the backend name the driver registers under.
const Name = "metal"

// Priority is the driver's priority for gpu.Open("auto"): above the sim.
const Priority = 20

// Environment variables read by the driver's Open (gpu.Open("metal")).
const (
	// FenceEnv selects the fence mode: "event" (default) or "shared" ("fast").
	FenceEnv = "CHOREO_METAL_FENCE"
	// WaitPollsEnv sets the bound of fast-mode GPU waits, in polls.
	WaitPollsEnv = "CHOREO_METAL_WAIT_POLLS"
)

// FenceMode is how fence words are implemented (see the package doc).
type FenceMode int

const (
	// FenceEvent: MTLSharedEvent words, waited on by the command processor.
	FenceEvent FenceMode = iota
	// FenceShared: shared-storage buffer words and the metalshader fence
	// kernels (MLX's fast mode), with bounded GPU waits.
	FenceShared
)

// String names the mode as FenceEnv spells it.
func (m FenceMode) String() string {
	if m == FenceShared {
		return "shared"
	}
	return "event"
}

// ParseFenceMode parses "event" or "shared" (also "fast", "slow").
func ParseFenceMode(s string) (FenceMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "event", "slow", "":
		return FenceEvent, nil
	case "shared", "fast":
		return FenceShared, nil
	}
	return 0, fmt.Errorf("metal: fence mode %q: want event or shared: %w", s, gpu.ErrBadArgument)
}

// Defaults.
const (
	// DefaultWaitPolls bounds a fast-mode GPU wait. One poll is a
	// system-scope fence and two loads, on the order of a microsecond, so
	// this is some seconds; only a Mac can calibrate it.
	DefaultWaitPolls uint64 = 1 << 24
	// DefaultCloseTimeout bounds how long Device.Close waits for each queue
	// before it releases the queue's pending waits.
	DefaultCloseTimeout = 2 * time.Second
	// DefaultDrainBound bounds how long a queue's Close waits for the GPU
	// to drain after it released the queue's waits.
	DefaultDrainBound = 10 * time.Second
	// statusSlots is how many batches a queue keeps in flight at once.
	statusSlots = 64
)

// Option configures a device opened with Open.
type Option func(*config)

// config is the resolved set of options.
type config struct {
	fence        FenceMode
	waitPolls    uint64
	closeTimeout time.Duration
	drainBound   time.Duration
}

func defaultConfig() config {
	return config{
		fence:        FenceEvent,
		waitPolls:    DefaultWaitPolls,
		closeTimeout: DefaultCloseTimeout,
		drainBound:   DefaultDrainBound,
	}
}

// WithFenceMode selects the fence implementation.
func WithFenceMode(m FenceMode) Option { return func(c *config) { c.fence = m } }

// WithWaitPolls sets how many polls a fast-mode GPU wait makes before it
// gives up and fails its batch with ErrWaitTimeout (at least 1).
func WithWaitPolls(n uint64) Option {
	return func(c *config) { c.waitPolls = max(n, 1) }
}

// WithCloseTimeout sets how long Device.Close waits for each queue.
func WithCloseTimeout(d time.Duration) Option { return func(c *config) { c.closeTimeout = d } }

// WithDrainBound sets how long Queue.Close waits for the GPU to drain after
// releasing the queue's waits.
func WithDrainBound(d time.Duration) Option { return func(c *config) { c.drainBound = d } }

// optionsFromEnv turns FenceEnv and WaitPollsEnv into options.
func optionsFromEnv(getenv func(string) string) ([]Option, error) {
	var opts []Option
	if s := getenv(FenceEnv); s != "" {
		m, err := ParseFenceMode(s)
		if err != nil {
			return nil, fmt.Errorf("metal: %s: %w", FenceEnv, err)
		}
		opts = append(opts, WithFenceMode(m))
	}
	if s := getenv(WaitPollsEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("metal: %s=%q: want a positive integer: %w", WaitPollsEnv, s, gpu.ErrBadArgument)
		}
		opts = append(opts, WithWaitPolls(n))
	}
	return opts, nil
}

// Driver opens Metal devices for gpu.Open. It keeps no state.
type Driver struct{}

func init() { gpu.Register(Name, Driver{}) }

// Open implements gpu.Driver with the options from the environment.
func (Driver) Open() (gpu.Device, error) {
	opts, err := optionsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	return Open(opts...)
}

// Priority implements gpu.Driver.
func (Driver) Priority() int { return Priority }
