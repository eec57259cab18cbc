package gpu

import (
	"context"
	"time"
)

// CommandTimer is implemented by devices that time commands on the GPU's
// own clock (events recorded on a stream around them): what a kernel or a
// copy takes, without the CPU's launch or the completion notice a wall
// clock counts. TimeCommands runs cmds reps times back to back and returns
// the fastest run; it blocks until they are done, bounded by ctx.
type CommandTimer interface {
	TimeCommands(ctx context.Context, cmds []Command, reps int) (time.Duration, error)
}
