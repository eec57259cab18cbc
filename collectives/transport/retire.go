package transport

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Retirer is implemented by transports that can refuse a group's messages
// for good: what a group's old epoch leaves behind once the survivors have
// moved to a new one.
//
// After Retire(group), every pending and future Send and Recv whose Tag
// has that Group fails with an error wrapping ErrStale; messages of the
// group that already arrived are dropped, and those that arrive later are
// refused (dropped on arrival; a sender waiting for its receiver fails
// with ErrStale). Other groups are untouched. Retire is idempotent; a
// transport remembers at least the last 4096 retired groups.
//
// Retire acts on this rank's side only: a peer that has not retired the
// group may still send in it (an eager message then returns nil and is
// dropped where it arrives; one that waits for its Recv fails with
// ErrStale) and may still wait in a Recv from this rank, until its own
// Retire or its context ends it.
type Retirer interface {
	Retire(group uint64)
}

// RetireMemory is how many retired groups a Retired remembers: more than
// the 4096 the Retirer contract asks for.
const RetireMemory = 1 << 13

// Retired is a transport's memory of its retired groups: the last
// RetireMemory of them, oldest forgotten first. Has costs one atomic load
// while no group was ever retired, and a lock-free map lookup after. The
// zero Retired is empty and ready; it is safe for concurrent use.
type Retired struct {
	any   atomic.Bool
	set   sync.Map // group (uint64) -> struct{}
	mu    sync.Mutex
	order []uint64 // a ring of the remembered groups, oldest at next
	next  int
}

// Has reports whether group is retired.
func (r *Retired) Has(group uint64) bool {
	if !r.any.Load() {
		return false
	}
	_, ok := r.set.Load(group)
	return ok
}

// Add retires group and reports whether it was not retired before.
func (r *Retired) Add(group uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.set.Load(group); ok {
		return false
	}
	if len(r.order) < RetireMemory {
		r.order = append(r.order, group)
	} else {
		r.set.Delete(r.order[r.next])
		r.order[r.next] = group
		r.next = (r.next + 1) % RetireMemory
	}
	r.set.Store(group, struct{}{})
	r.any.Store(true)
	return true
}

// Len is how many retired groups r remembers.
func (r *Retired) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order)
}

// StaleError is the error of a call or message of retired group: it
// wraps ErrStale.
func StaleError(group uint64) error {
	return fmt.Errorf("%w: group %d was retired", ErrStale, group)
}
