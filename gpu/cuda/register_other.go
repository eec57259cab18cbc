//go:build !linux

package cuda

import (
	"fmt"
	"runtime"

	"github.com/choreo-gpu/choreo/gpu"
)

func init() { gpu.Register(Name, Driver{}) }

// Name is the name the backend registers under.
const Name = "cuda"

// Driver is the CUDA driver on a system this backend does not support:
// Open always fails with an error wrapping ErrUnavailable and
// gpu.ErrNoBackend, so "auto" moves on.
type Driver struct{}

// Open implements gpu.Driver.
func (Driver) Open() (gpu.Device, error) {
	return nil, fmt.Errorf("cuda: not supported on %s: %w (%w)", runtime.GOOS, ErrUnavailable, gpu.ErrNoBackend)
}

// Priority implements gpu.Driver.
func (Driver) Priority() int { return Priority }
