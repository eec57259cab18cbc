package collectives

import (
	"sync"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/pool"
)

// maxFreePerClass bounds how many idle staging buffers a group keeps per
// device and size class (ops issued back to back each hold two until they
// complete). A buffer beyond it goes back to the backend, which on CUDA
// keeps it cached too, but clears it when it hands it out again.
const maxFreePerClass = 16

// maxIdleBytes bounds the pinned memory a group keeps idle in all.
const maxIdleBytes = 1 << 30

// stagingPool keeps a group's pinned staging buffers (where the CPU cannot
// see device memory) for its later calls. Every HostMem allocation is
// zero-filled, and a staging buffer is always overwritten whole before it
// is read (by the input's copy, or by the collective into its output), so
// reusing one saves the allocation and the clearing: on the H200 a 4-rank
// 64 MiB all-reduce cleared 2 x 64 MiB per rank per call on the caller's
// goroutine. Buffers are kept by power-of-two size class, at most
// maxFreePerClass per class and maxIdleBytes in all; the rest, and all of
// them once the group has closed, are freed. Safe for concurrent use.
type stagingPool struct {
	mu     sync.Mutex
	free   pool.Lists[stagingKey, gpu.Buffer]
	closed bool
}

type stagingKey struct {
	dev   gpu.Device
	class int
}

// get returns a staging buffer of at least n > 0 bytes on dev, with the
// pool's share; its contents are undefined.
func (p *stagingPool) get(dev gpu.Device, n int) (*shared, error) {
	k := stagingKey{dev, pool.Class(n)}
	p.mu.Lock()
	b, ok := p.free.Take(k)
	p.mu.Unlock()
	if ok {
		return newShared(p, k, b), nil
	}
	b, err := dev.Alloc(k.class, gpu.HostMem)
	if err != nil {
		return nil, err
	}
	return newShared(p, k, b), nil
}

// put takes b back, or frees it if the pool is full or closed.
func (p *stagingPool) put(k stagingKey, b gpu.Buffer) {
	p.mu.Lock()
	if !p.closed && p.free.Len(k) < maxFreePerClass && p.free.Bytes()+k.class <= maxIdleBytes {
		p.free.Put(k, b, k.class)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = b.Free()
}

// close frees the idle buffers; buffers in use are freed when released.
func (p *stagingPool) close() {
	p.mu.Lock()
	p.closed = true
	var idle []gpu.Buffer
	for _, b := range p.free.All() {
		idle = append(idle, b)
	}
	p.free.Clear()
	p.mu.Unlock()
	for _, b := range idle {
		_ = b.Free()
	}
}

// shared is a staging buffer used by the GPU stream and the comm task: it
// starts with the task's share, each command that uses it adds one, and the
// last release hands it back to its pool. A nil *shared is no buffer.
type shared struct {
	buf  gpu.Buffer
	refs atomic.Int32
	pool *stagingPool
	key  stagingKey
}

func newShared(p *stagingPool, k stagingKey, b gpu.Buffer) *shared {
	sh := &shared{buf: b, pool: p, key: k}
	sh.refs.Store(1)
	return sh
}

func (sh *shared) release() {
	if sh != nil && sh.refs.Add(-1) == 0 {
		sh.pool.put(sh.key, sh.buf)
	}
}

// bytes is the CPU's view of a payload: the staging buffer if there is one,
// else the device buffer itself (host-visible backends).
func (sh *shared) bytes(buf gpu.Buffer, n int) []byte {
	if sh != nil {
		return sh.buf.Bytes()[:n]
	}
	return buf.Bytes()[:n]
}
