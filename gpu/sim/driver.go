package sim

import (
	"os"
	"strconv"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// Name is the backend name the sim driver registers under.
const Name = "sim"

// DefaultMemoryBytes is the memory of sim devices where the machine's
// cannot be read (see HostMemoryBytes).
const DefaultMemoryBytes uint64 = 16 << 30

// DefaultCloseTimeout bounds how long Device.Close waits for each queue to
// drain before it releases the queue's fence waits (see Queue.Close).
const DefaultCloseTimeout = 2 * time.Second

// MemoryEnv names the environment variable that overrides the memory size
// of devices opened through the driver (gpu.Open("sim")), in bytes.
const MemoryEnv = "CHOREO_SIM_MEMORY_BYTES"

// StagedName is the backend name of sim devices whose device memory the
// CPU cannot see (WithStagedDeviceMemory): CI runs the staging paths that
// the CUDA backend takes through them.
const StagedName = "sim-staged"

func init() {
	gpu.Register(Name, Driver{})
	gpu.Register(StagedName, stagedDriver{})
}

// stagedDriver opens sim devices with WithStagedDeviceMemory. Its priority
// is below sim's, so "auto" never picks it.
type stagedDriver struct{}

func (stagedDriver) Open() (gpu.Device, error) { return openEnv(WithStagedDeviceMemory()) }

func (stagedDriver) Priority() int { return -1 }

// Driver opens sim devices. It keeps no state: every Open returns a new,
// independent Device. Its priority is 0, the lowest, so "auto" picks any
// hardware backend that opens before it.
type Driver struct{}

// Open returns a new sim device with the default options; the memory size
// may be overridden by the CHOREO_SIM_MEMORY_BYTES environment variable.
func (Driver) Open() (gpu.Device, error) { return openEnv() }

// openEnv opens a device with opts and the memory size from the environment.
func openEnv(opts ...Option) (gpu.Device, error) {
	if s := os.Getenv(MemoryEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, &configError{what: MemoryEnv + "=" + s, err: err}
		}
		opts = append(opts, WithMemoryBytes(n))
	}
	return New(opts...)
}

// Priority implements gpu.Driver: 0, the lowest.
func (Driver) Priority() int { return 0 }

// Option configures a device made by New.
type Option func(*config)

// config is a device's settings, fixed when New builds it. pool is the
// host memory its blocks come from (processPool unless a test says).
type config struct {
	memoryBytes  uint64
	closeTimeout time.Duration
	staged       bool
	pool         *hostPool
}

// WithStagedDeviceMemory hides DeviceMem buffers from the CPU (Bytes returns
// nil, Properties.HostVisibleDeviceMem is false) and fills new ones with
// 0xA5 rather than zeros, as on a discrete GPU that reuses memory, so that
// the code paths that stage through host memory run on sim too and nothing
// can rely on zeroed device memory.
func WithStagedDeviceMemory() Option { return func(c *config) { c.staged = true } }

// WithMemoryBytes sets the memory size the device reports and enforces
// (HostMemoryBytes by default): Alloc fails with gpu.ErrOutOfMemory beyond
// it. The host's memory still bounds every device (see HostMemoryBytes),
// so a size above it cannot make an allocation kill the process.
func WithMemoryBytes(n uint64) Option { return func(c *config) { c.memoryBytes = n } }

// WithCloseTimeout sets how long Device.Close waits for each queue to drain
// before it releases the queue's pending fence waits.
func WithCloseTimeout(d time.Duration) Option { return func(c *config) { c.closeTimeout = d } }

// New returns a new, independent sim device.
func New(opts ...Option) (*Device, error) {
	c := config{memoryBytes: HostMemoryBytes(), closeTimeout: DefaultCloseTimeout, pool: processPool()}
	for _, o := range opts {
		o(&c)
	}
	return newDevice(c), nil
}
