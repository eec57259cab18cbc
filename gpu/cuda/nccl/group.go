package nccl

import (
	"fmt"
	"runtime"
	"sync"
)

// groups counts the open groups of each OS thread, as NCCL does in its
// thread-local group depth, so that GroupEnd can tell a matching call
// (whose thread GroupStart locked) from a stray one without asking NCCL.
var groups struct {
	mu    sync.Mutex
	depth map[int]int // thread id -> open groups
}

// GroupStart opens an NCCL group (ncclGroupStart): the calls made until
// the matching GroupEnd, on any communicators, are fused and launched at
// GroupEnd. Groups nest. NCCL keeps the group in the OS thread, so
// GroupStart locks the calling goroutine to its thread (runtime.
// LockOSThread) and the matching GroupEnd unlocks it: the calls of the
// group and GroupEnd must come from the same goroutine. On error the
// thread is not left locked. Prefer Group, which pairs them.
func GroupStart() error {
	l, err := load()
	if err != nil {
		return err
	}
	return groupStart(l)
}

func groupStart(l *library) error {
	runtime.LockOSThread()
	if err := l.check("group start", "ncclGroupStart", l.ncclGroupStart()); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	tid := threadID()
	groups.mu.Lock()
	if groups.depth == nil {
		groups.depth = map[int]int{}
	}
	groups.depth[tid]++
	groups.mu.Unlock()
	return nil
}

// GroupEnd closes the group of the matching GroupStart (ncclGroupEnd),
// which launches its work (and, for the outermost group, may wait for the
// peers' connections), then unlocks the thread that GroupStart locked,
// whether or not NCCL succeeded: NCCL has left the group either way. A
// GroupEnd with no group open on the calling goroutine's thread fails with
// ErrInvalidUsage and changes nothing.
func GroupEnd() error {
	l, err := load()
	if err != nil {
		return err
	}
	return groupEnd(l)
}

func groupEnd(l *library) error {
	tid := threadID()
	groups.mu.Lock()
	if groups.depth[tid] == 0 {
		groups.mu.Unlock()
		return fmt.Errorf("nccl: group end: no group open on this goroutine (GroupStart, or another goroutine's): %w", ErrInvalidUsage)
	}
	if groups.depth[tid]--; groups.depth[tid] == 0 {
		delete(groups.depth, tid)
	}
	groups.mu.Unlock()
	err := l.check("group end", "ncclGroupEnd", l.ncclGroupEnd())
	runtime.UnlockOSThread()
	return err
}

// Group runs f inside GroupStart and GroupEnd on one locked thread. It
// returns f's error (the group is still ended, so that NCCL leaves its
// group state; also when f panics) or GroupEnd's.
func Group(f func() error) error {
	if f == nil {
		return badArgf("group", "nil function")
	}
	l, err := load()
	if err != nil {
		return err
	}
	return group(l, f)
}

func group(l *library, f func() error) error {
	if err := groupStart(l); err != nil {
		return err
	}
	ended := false
	defer func() {
		if !ended { // f panicked: leave NCCL's group and unlock the thread on the way out
			_ = groupEnd(l)
		}
	}()
	ferr := f()
	ended = true
	gerr := groupEnd(l)
	if ferr != nil {
		if gerr != nil {
			return fmt.Errorf("%w (and group end: %w)", ferr, gerr)
		}
		return ferr
	}
	return gerr
}
