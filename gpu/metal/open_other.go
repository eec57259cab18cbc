//go:build !darwin

package metal

import (
	"fmt"
	"runtime"

	"github.com/choreo-gpu/choreo/gpu"
)

// Open reports that Metal needs macOS: the error wraps gpu.ErrNoBackend,
// so gpu.Open("auto") moves on to the next backend.
func Open(opts ...Option) (gpu.Device, error) {
	c := defaultConfig()
	for _, o := range opts {
		o(&c)
	}
	return nil, fmt.Errorf("metal: open: Metal needs macOS on Apple silicon, this is %s/%s: %w",
		runtime.GOOS, runtime.GOARCH, gpu.ErrNoBackend)
}
