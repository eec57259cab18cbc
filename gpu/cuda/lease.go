//go:build linux

package cuda

import "sync"

// lease counts the queued commands that name a resource (a buffer or a
// fence word) and defers giving the memory back until none does: Free
// marks the resource freed at once (commands issued later fail with
// gpu.ErrClosed), but release runs only when the last batch naming it has
// completed. release runs exactly once, outside the lease's lock.
type lease struct {
	mu       sync.Mutex
	refs     int
	freed    bool
	released bool
	release  func()
}

// acquire adds a reference for a submitted batch; it reports false (and
// adds none) if the resource is already freed.
func (l *lease) acquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.freed {
		return false
	}
	l.refs++
	return true
}

// drop removes a reference taken by acquire.
func (l *lease) drop() {
	l.mu.Lock()
	l.refs--
	run := l.freed && l.refs == 0 && !l.released
	if run {
		l.released = true
	}
	l.mu.Unlock()
	if run {
		l.release()
	}
}

// free marks the resource freed; it reports false if it already was.
func (l *lease) free() bool {
	l.mu.Lock()
	if l.freed {
		l.mu.Unlock()
		return false
	}
	l.freed = true
	run := l.refs == 0 && !l.released
	if run {
		l.released = true
	}
	l.mu.Unlock()
	if run {
		l.release()
	}
	return true
}

// isFreed reports whether free was called.
func (l *lease) isFreed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.freed
}

// resource is what a command names: a buffer or a word.
type resource interface {
	lease() *lease
}
