package actors

import (
	"os"
	"time"

	"go.uber.org/zap"
)

// config holds a Runtime's settings.
type config struct {
	log          *zap.Logger
	name         string
	closeTimeout time.Duration
	signals      []os.Signal
	onSignal     func(os.Signal)
}

// Option configures a Runtime.
type Option func(*config)

// WithLogger sends every log line of the runtime (and of protoactor, through
// the slog bridge) to log. The default discards them.
func WithLogger(log *zap.Logger) Option {
	return func(c *config) {
		if log != nil {
			c.log = log
		}
	}
}

// WithName labels the runtime in logs.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithCloseTimeout bounds Close (default 10 s).
func WithCloseTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.closeTimeout = d
		}
	}
}

// WithSignalHandler installs a handler for SIGINT and SIGTERM that releases
// every live fence (so no GPU is left spinning on a fence word: the hole
// that made MLX drop its single-fence change), closes the runtime, and then
// lets the signal take its default effect (the process exits). onSignal, if
// given, runs after the release and before the exit.
func WithSignalHandler(onSignal ...func(os.Signal)) Option {
	return func(c *config) {
		c.signals = termSignals
		if len(onSignal) > 0 {
			c.onSignal = onSignal[0]
		}
	}
}
