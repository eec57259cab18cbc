package sim

import (
	"fmt"

	"github.com/choreo-gpu/choreo/gpu"
)

// configError reports a bad driver setting; it wraps gpu.ErrBadArgument and
// the parse error.
type configError struct {
	what string
	err  error
}

func (e *configError) Error() string {
	return fmt.Sprintf("sim: open: bad setting %s: %v", e.what, e.err)
}

func (e *configError) Unwrap() []error { return []error{gpu.ErrBadArgument, e.err} }

// errClosedf returns an error "sim: <msg>: closed" wrapping gpu.ErrClosed.
func errClosedf(format string, args ...any) error {
	return fmt.Errorf("sim: "+format+": %w", append(args, gpu.ErrClosed)...)
}

// errBadf returns an error "sim: <msg>: bad argument" wrapping
// gpu.ErrBadArgument.
func errBadf(format string, args ...any) error {
	return fmt.Errorf("sim: "+format+": %w", append(args, gpu.ErrBadArgument)...)
}
