//go:build linux

package cuda

import (
	"fmt"
	"os"

	"github.com/choreo-gpu/choreo/gpu"
)

func init() { gpu.Register(Name, Driver{}) }

// Driver opens CUDA devices for gpu.Open("cuda") and "auto". It keeps no
// state: every Open returns a new Device. Its GPU comes from the
// environment: the ordinal in CHOREO_CUDA_DEVICE if set (an integer from 0
// to the number of GPUs the driver sees, less one; another value is an
// error wrapping gpu.ErrBadArgument), else the process's local rank
// (CHOREO_LOCAL_RANK, which demo launch sets, or torchrun's, Open MPI's,
// MPICH's or Slurm's; see collectives.LocalRank) modulo the number of GPUs
// seen, so that the ranks of one host spread over its GPUs and share them
// when there are more ranks than GPUs, else 0. Device.Ordinal reports it.
// The WriteValue mode comes from CHOREO_CUDA_WRITE ("memop", the default,
// or "kernel"). Its priority is above sim's, so "auto" picks CUDA wherever
// the driver opens.
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
	ord, err := chooseOrdinal(os.Getenv, DeviceCount)
	if err != nil {
		return nil, err
	}
	o.Ordinal = ord
	return New(o)
}

// Priority implements gpu.Driver.
func (Driver) Priority() int { return Priority }
