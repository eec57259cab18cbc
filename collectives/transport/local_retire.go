package transport

import "fmt"

// Retire implements Retirer for an in-process rank: its pending Sends and
// Recvs of group fail with ErrStale, and so do the peers' Sends waiting
// for it (their messages are refused, never received); later calls of
// group fail at once, and so do the peers' Sends of group to this rank.
// A peer's Recv from this rank waits on (this rank sends no more in the
// group) until its own Retire or context ends it. The group's windows
// fail on every rank, and so does every later Expose of the group.
func (l *local) Retire(group uint64) {
	h := l.hub
	h.mu.Lock()
	if !h.retired[l.rank].Add(group) {
		h.mu.Unlock()
		return
	}
	stale, refused := StaleError(group), refusedError(l.rank, group)
	for mk, q := range h.queues {
		if mk.tag.Group != group {
			continue
		}
		switch l.rank {
		case mk.dst: // the peer's sends to this rank, this rank's recvs
			failAll(q, refused, stale)
			delete(h.queues, mk)
		case mk.src: // this rank's sends; the peer's recvs wait on
			for _, p := range q.sends {
				p.done <- stale
			}
			q.sends = nil
			h.dropIfEmptyLocked(mk, q)
		}
	}
	var ws []*window
	for t, w := range h.windows {
		if t.Group == group {
			ws = append(ws, w)
			delete(h.windows, t)
		}
	}
	h.mu.Unlock()
	for _, w := range ws {
		w.fail(stale)
	}
}

// refusedError is the error of a Send of group to rank, which retired
// the group.
func refusedError(rank int, group uint64) error {
	return fmt.Errorf("%w: rank %d retired group %d", ErrStale, rank, group)
}
