package metal

import (
	"errors"
	"fmt"

	"github.com/choreo-gpu/choreo/gpu"
)

// ErrWaitTimeout: a fast-mode GPU wait (fence_wait) gave up after its poll
// bound; the batch failed and its later commands did not run.
var ErrWaitTimeout = errors.New("GPU fence wait gave up")

// errClosedf returns "metal: <msg>: closed", wrapping gpu.ErrClosed.
func errClosedf(format string, args ...any) error {
	return fmt.Errorf("metal: "+format+": %w", append(args, gpu.ErrClosed)...)
}

// errBadf returns "metal: <msg>: bad argument", wrapping gpu.ErrBadArgument.
func errBadf(format string, args ...any) error {
	return fmt.Errorf("metal: "+format+": %w", append(args, gpu.ErrBadArgument)...)
}
