package actors

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
)

var termSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM}

// ErrSignal is the cause given to fences released because the process got
// SIGINT or SIGTERM.
var ErrSignal = errors.New("process interrupted by signal")

// watchSignals runs the handler installed by WithSignalHandler until the
// runtime closes. A second signal while the first is being handled takes
// its default effect at once, as Go programs conventionally do.
func (r *Runtime) watchSignals() {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, r.cfg.signals...)
	go func() {
		defer signal.Stop(ch)
		select {
		case <-r.done:
			return
		case sig := <-ch:
			handled := make(chan struct{})
			go func() {
				select {
				case again := <-ch:
					r.log.Warn("second signal: exiting now", zap.String("signal", again.String()))
					die(again)
				case <-handled:
				}
			}()
			n := r.releaseAll(ErrSignal)
			r.log.Warn("signal: released every live fence", zap.String("signal", sig.String()), zap.Int("fences", n))
			ctx, cancel := context.WithTimeout(context.Background(), r.cfg.closeTimeout)
			_ = r.close(ctx)
			cancel()
			if r.cfg.onSignal != nil {
				r.cfg.onSignal(sig)
			}
			close(handled)
			die(sig)
		}
	}()
}

// die gives sig its default effect on the process (it exits).
func die(sig os.Signal) {
	signal.Reset(sig)
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(os.Getpid(), s)
	}
}
