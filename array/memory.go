package array

import (
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/gpu"
)

// Memory is the device buffer behind one or more arrays (a donated input
// and the output that took it over share one) and its lifetime. The buffer
// goes back to the device once its owner has let go (Array.Free, or the
// Memory became unreachable) and every reader that retained it is done.
// Whatever hands the buffer to work that outlives the call (commands on any
// stream, comm tasks, staging copies) retains the Memory first and releases
// it when that work has completed, so no buffer is reused while anything
// still reads or writes it, whichever stream or task that is.
type Memory struct {
	st *memState
}

// memState is a Memory's buffer and counts, apart from the handle, so the
// cleanup that runs when the handle is unreachable can reach them.
type memState struct {
	buf gpu.Buffer
	// refs counts the owner (1 until Free or the cleanup) and every
	// retained reader; the buffer is freed when it drops to 0, and it never
	// rises again from 0.
	refs  atomic.Int64
	freed atomic.Bool // the owner let go: no reader may start any more
}

func newMemory(buf gpu.Buffer) *Memory {
	st := &memState{buf: buf}
	st.refs.Store(1)
	m := &Memory{st: st}
	runtime.AddCleanup(m, func(st *memState) { st.letGo() }, st)
	return m
}

// Buffer is the device buffer.
func (m *Memory) Buffer() gpu.Buffer { return m.st.buf }

// Retain registers a reader: the buffer stays valid until the matching
// Release. It fails with ErrFreed once the owner has freed the memory.
func (m *Memory) Retain() error {
	st := m.st
	for {
		r := st.refs.Load()
		if r == 0 || st.freed.Load() {
			return fmt.Errorf("array: memory of %d bytes: %w", st.buf.Len(), ErrFreed)
		}
		if st.refs.CompareAndSwap(r, r+1) {
			return nil
		}
	}
}

// Release ends one Retain.
func (m *Memory) Release() { m.st.drop() }

// Freed reports whether the owner has let go of the memory.
func (m *Memory) Freed() bool { return m.st.freed.Load() }

// letGo drops the owner's reference, once.
func (st *memState) letGo() {
	if !st.freed.Swap(true) {
		st.drop()
	}
}

func (st *memState) drop() {
	switch r := st.refs.Add(-1); {
	case r == 0:
		_ = st.buf.Free()
	case r < 0:
		panic("array: Memory released more often than retained")
	}
}
