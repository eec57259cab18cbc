package transport

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
type Retirer interface {
	Retire(group uint64)
}
