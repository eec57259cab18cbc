package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/choreo-gpu/choreo/internal/errs"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
)

// ErrClosed: the runtime is closed or closing.
var ErrClosed = errs.ErrClosed

// Runtime is one choreo node: an ActorSystem with zap logging, supervision
// defaults and signal handling, the services attached to it (the fence
// manager, the default comm stream: see Service) and the things adopted by
// it (streams). Several runtimes can live in one process. Close is
// idempotent, bounded, and returns only when the runtime's actors have
// stopped; every method is safe for concurrent use.
type Runtime struct {
	cfg config
	sys *actor.ActorSystem
	log *zap.Logger

	svcMu sync.Mutex // serialises creating services

	mu        sync.Mutex
	closing   bool
	adopted   []adopted
	services  []service
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// adopted is something the runtime closes when it closes.
type adopted struct {
	name string
	c    Closer
}

// NewRuntime starts a runtime: the ActorSystem, with protoactor's slog
// bridged into the zap core of WithLogger. Services attach on first use.
func NewRuntime(opts ...Option) (*Runtime, error) {
	cfg := config{log: zap.NewNop(), closeTimeout: 10 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	log := cfg.log.Named("choreo")
	if cfg.name != "" {
		log = log.With(zap.String("runtime", cfg.name))
	}
	bridge := slog.New(zapslog.NewHandler(log.Named("protoactor").Core()))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return bridge }))
	r := &Runtime{cfg: cfg, sys: sys, log: log, done: make(chan struct{})}
	if len(cfg.signals) > 0 {
		r.watchSignals()
	}
	log.Debug("runtime started", zap.String("system", sys.ID))
	return r, nil
}

// ActorSystem is the runtime's protoactor system.
func (r *Runtime) ActorSystem() *actor.ActorSystem { return r.sys }

// Logger is the runtime's logger.
func (r *Runtime) Logger() *zap.Logger { return r.log }

// Done is closed once Close has finished.
func (r *Runtime) Done() <-chan struct{} { return r.done }

// Adopt registers c to be closed when the runtime closes, in reverse order
// of adoption. It fails with ErrClosed once the runtime is closing.
func (r *Runtime) Adopt(name string, c Closer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return fmt.Errorf("actors: adopt %s: %w", name, ErrClosed)
	}
	r.adopted = append(r.adopted, adopted{name, c})
	return nil
}

// Closed reports whether Close has begun.
func (r *Runtime) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closing
}

// Close lets every GPU wait pass (each Releaser service's ReleaseAll), closes
// what it adopted (newest first), then the services (in the order they
// attached), those whose key says CloseLast (remoting) after the others, within the close
// timeout (WithCloseTimeout). Errors of the parts are joined.
func (r *Runtime) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.closeTimeout)
	defer cancel()
	return r.close(ctx)
}

func (r *Runtime) close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closing = true
		parts := slices.Clone(r.adopted)
		for _, s := range r.services { // closed after the adopted, oldest first
			if !s.key.CloseLast {
				parts = append([]adopted{{s.key.Name, s.c}}, parts...)
			}
		}
		for _, s := range r.services { // last: the others may still use them while closing
			if s.key.CloseLast {
				parts = append([]adopted{{s.key.Name, s.c}}, parts...)
			}
		}
		r.mu.Unlock()
		var errs []error
		n := r.releaseAll(ErrClosed) // first: let every GPU wait pass
		for i := len(parts) - 1; i >= 0; i-- {
			t0 := time.Now()
			err := parts[i].c.Close(ctx)
			r.log.Debug("closed", zap.String("part", parts[i].name), zap.Duration("took", time.Since(t0)), zap.Error(err))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", parts[i].name, err))
			}
		}
		r.sys.Shutdown()
		if len(errs) > 0 {
			r.closeErr = fmt.Errorf("actors: close: %w", errors.Join(errs...))
		}
		r.log.Debug("runtime closed", zap.Int("fences_released", n), zap.Error(r.closeErr))
		close(r.done)
	})
	<-r.done
	return r.closeErr
}
