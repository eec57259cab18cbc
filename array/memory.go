package array

import (
	"runtime"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/gpu"
)

// Memory is the device buffer behind one or more arrays (a donated input
// and the output that took it over share one) and its lifetime: the buffer
// is freed once the Memory is unreachable (no array, queued op or comm task
// holds it), or earlier by Array.Free. A backend never reuses a freed
// buffer while a submitted command still names it, and everything that
// puts commands on a stream holds the Memory until they are submitted, so
// dropping an array right after using it is safe.
type Memory struct {
	buf   gpu.Buffer
	freed atomic.Bool
}

func newMemory(buf gpu.Buffer) *Memory {
	m := &Memory{buf: buf}
	runtime.AddCleanup(m, func(b gpu.Buffer) { _ = b.Free() }, buf)
	return m
}

// Buffer is the device buffer.
func (m *Memory) Buffer() gpu.Buffer { return m.buf }
