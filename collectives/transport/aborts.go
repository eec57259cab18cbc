package transport

import "sync"

// AbortMemory is how many aborted collectives an Aborts remembers: more
// than the 4096 the Transport contract asks for.
const AbortMemory = 1 << 14

// Aborts is a transport's memory of the collectives aborted on it, for
// the Transport contract's rule that an Abort fails every future Send and
// Recv of its collective: the last AbortMemory collectives, oldest
// forgotten first. When two ranks abort one collective at once, every rank
// keeps the record with the earliest (when, origin), so all converge on
// one origin. The zero Aborts is empty and ready; it is safe for
// concurrent use.
type Aborts struct {
	mu    sync.Mutex
	recs  map[collKey]abortRec
	order []collKey // oldest first
}

// abortRec is one remembered abort, made at when (Unix nanoseconds, at
// its origin).
type abortRec struct {
	when int64
	err  *AbortError
}

// Of returns the AbortError of tag's collective, or nil.
func (a *Aborts) Of(tag Tag) *AbortError {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.recs[keyOf(tag)].err
}

// Record remembers err, made at when by err.Origin, and reports whether it
// is now the collective's record: a collective's first abort is; a later
// one replaces it only if it is not local and was made earlier (or at the
// same time by a lower origin). A local abort (this rank's own) never
// replaces one already known.
func (a *Aborts) Record(err *AbortError, when int64, local bool) bool {
	k := collKey{err.Group, err.Seq}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.recs == nil {
		a.recs = make(map[collKey]abortRec)
	}
	if old, ok := a.recs[k]; ok {
		if local || when > old.when || (when == old.when && err.Origin >= old.err.Origin) {
			return false
		}
		a.recs[k] = abortRec{when, err}
		return true
	}
	a.recs[k] = abortRec{when, err}
	a.order = append(a.order, k)
	if len(a.order) > AbortMemory {
		delete(a.recs, a.order[0])
		a.order[0] = collKey{}
		a.order = a.order[1:]
	}
	return true
}
