//go:build linux

package cuda

import (
	"fmt"
	"os"

	"github.com/choreo-gpu/choreo/gpu"
)

func init() { gpu.Register(Name, Driver{}) }

// Driver opens CUDA devices for gpu.Open("cuda") and "auto". It keeps no
// state: every Open returns a new Device on ordinal 0. The WriteValue mode
// comes from the environment variable CHOREO_CUDA_WRITE ("memop", the
// default, or "kernel"). Its priority is above sim's, so "auto" picks CUDA
// wherever the driver opens.
type Driver struct{}

// Open implements gpu.Driver.
func (Driver) Open() (gpu.Device, error) {
	var o Options
	switch v := os.Getenv(WriteEnv); v {
	case "", "memop":
	case "kernel":
		o.MonotonicKernel = true
	default:
		return nil, fmt.Errorf("cuda: %s=%q: want memop or kernel: %w", WriteEnv, v, gpu.ErrBadArgument)
	}
	return New(o)
}

// Priority implements gpu.Driver.
func (Driver) Priority() int { return Priority }
