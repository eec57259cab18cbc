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
type ServiceKey struct {
	Name string
	// CloseLast closes the service after every service without it: for
	// what the others may still use while they close (remoting, which
	// they may talk to peers through).
	CloseLast bool
}

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
// comm stream, remoting) attach here, so this package imports none of
// them. Services close after everything adopted, in the order they
// attached, those whose key says CloseLast after the others. It fails with ErrClosed once the runtime is
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

// Lookup returns the runtime's service under key and true, or the zero
// value and false when none is attached (for a service that must be
// started explicitly, such as remoting, rather than on first use).
func Lookup[T Closer](r *Runtime, key *ServiceKey) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.services {
		if s.key == key {
			t, ok := s.c.(T)
			return t, ok
		}
	}
	var zero T
	return zero, false
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
