package gpu

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
)

// registry is the process-wide table of backends. It holds drivers only,
// never devices, so two runtimes in one process do not share state.
var registry struct {
	sync.RWMutex
	drivers map[string]Driver
}

// Register makes a backend available under name. It panics if name is
// empty, "auto", already registered, or d is nil: these are programmer
// errors in a backend's init function, as in database/sql.
func Register(name string, d Driver) {
	registry.Lock()
	defer registry.Unlock()
	if d == nil || name == "" || name == "auto" {
		panic("gpu: Register: bad driver or name " + name)
	}
	if _, dup := registry.drivers[name]; dup {
		panic("gpu: Register called twice for " + name)
	}
	if registry.drivers == nil {
		registry.drivers = map[string]Driver{}
	}
	registry.drivers[name] = d
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.drivers))
	for n := range registry.drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open opens the default device of the named backend. "auto" (or "") tries
// every registered backend from the highest priority down and returns the
// first that opens; the sim backend has the lowest priority, so it is the
// fallback. Errors wrap ErrNoBackend.
func Open(name string) (Device, error) {
	registry.RLock()
	drivers := make(map[string]Driver, len(registry.drivers))
	for n, d := range registry.drivers {
		drivers[n] = d
	}
	registry.RUnlock()

	if name != "" && name != "auto" {
		d, ok := drivers[name]
		if !ok {
			return nil, fmt.Errorf("gpu: open %q: not registered (have %v; import its package): %w",
				name, Backends(), ErrNoBackend)
		}
		dev, err := d.Open()
		if err != nil {
			return nil, fmt.Errorf("gpu: open %q: %w", name, err)
		}
		return dev, nil
	}
	names := make([]string, 0, len(drivers))
	for n := range drivers {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if pa, pb := drivers[a].Priority(), drivers[b].Priority(); pa != pb {
			return pb - pa
		}
		if a < b {
			return -1
		}
		return 1
	})
	var errs []error
	for _, n := range names {
		dev, err := drivers[n].Open()
		if err == nil {
			return dev, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", n, err))
	}
	return nil, fmt.Errorf("gpu: open auto: no backend opened: %w", errors.Join(append(errs, ErrNoBackend)...))
}
