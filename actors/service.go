package actors

import (
	"context"
	"fmt"
)

// Closer is something with a bounded close.
type Closer interface {
	Close(ctx context.Context) error
}

// Releaser is implemented by services that hold something a GPU may be
// waiting on (the fence manager): ReleaseAll lets every such wait pass at
// once, without the service's actor. The runtime calls it first when it
// closes and from its signal handler, and it returns how many it released.
type Releaser interface {
	ReleaseAll(cause error) int
}

// ServiceKey names a per-runtime service. Each service package declares one
// (a pointer to a package-level value is unique and comparable).
type ServiceKey struct{ Name string }

// service is an attached service and its key.
type service struct {
	key *ServiceKey
	c   Closer
}

// Service returns the runtime's service under key, creating it with create
// on first use. It is the runtime's equivalent of protoactor's per-system
// Extensions (which remote and cluster use), with a lock, because that
// registry is a plain array that lazy attaching from many goroutines would
// race on. Services above this package (the fence manager, the default
// comm stream, later the remote handlers) attach here, so this package
// imports none of them. Services close after everything adopted, in
// reverse order of attaching. It fails with ErrClosed once the runtime is
// closing.
func Service[T Closer](r *Runtime, key *ServiceKey, create func(*Runtime) (T, error)) (T, error) {
	var zero T
	r.svcMu.Lock() // held across create: one service per key
	defer r.svcMu.Unlock()
	for _, s := range r.services {
		if s.key == key {
			return s.c.(T), nil
		}
	}
	if r.Closed() {
		return zero, fmt.Errorf("actors: service %s: %w", key.Name, ErrClosed)
	}
	c, err := create(r)
	if err != nil {
		return zero, fmt.Errorf("actors: service %s: %w", key.Name, err)
	}
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.closeTimeout)
		defer cancel()
		_ = c.Close(ctx)
		return zero, fmt.Errorf("actors: service %s: %w", key.Name, ErrClosed)
	}
	r.services = append(r.services, service{key, c})
	r.mu.Unlock()
	return c, nil
}

// releaseAll calls ReleaseAll on every service that is a Releaser.
func (r *Runtime) releaseAll(cause error) int {
	r.mu.Lock()
	svcs := append([]service(nil), r.services...)
	r.mu.Unlock()
	n := 0
	for _, s := range svcs {
		if rel, ok := s.c.(Releaser); ok {
			n += rel.ReleaseAll(cause)
		}
	}
	return n
}
