package sim

import (
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/pool"
)

// The block cache: fresh Go memory for a large buffer costs page faults and
// clearing on every allocation, so blocks of cacheMin bytes or more are
// rounded up to a size class and reused (pool.Lists, not a sync.Pool: every
// block counts against the host's memory until the device gives it up).
// Classes are powers of two up to fineMin; above it every power of two is
// cut in fineSteps, so that rounding wastes at most an eighth of a large
// block.
const (
	cacheMin   = 64 << 10
	cacheLimit = 4 << 30 // bytes the cache may hold
	fineMin    = 256 << 20
	fineSteps  = 16
)

// blockSize is the size of the block that holds n bytes: its size class,
// or n itself below cacheMin.
func blockSize(n int) int {
	if n < cacheMin {
		return n
	}
	c := pool.Class(n)
	if c <= fineMin {
		return c
	}
	g := c / fineSteps
	return (n + g - 1) / g * g
}

// takeCachedLocked returns a cached block for n bytes, or nil; d.mu is
// held.
func (d *Device) takeCachedLocked(n int) []byte {
	if n < cacheMin {
		return nil
	}
	raw, _ := d.cache.Take(blockSize(n))
	return raw
}

// dropCacheLocked gives every cached block up to the collector; d.mu is
// held.
func (d *Device) dropCacheLocked() {
	if n := d.cache.Bytes(); n > 0 {
		d.cfg.pool.drop(uint64(n))
	}
	d.cache.Clear()
}

// putCached keeps a freed block for reuse, unless it is small, not of a
// size class (made to measure near the memory limit), the cache is full or
// the device is closed; a block not kept leaves the host pool.
func (d *Device) putCached(raw []byte) {
	c := len(raw) - (align - 1)
	if c < cacheMin {
		d.cfg.pool.release(uint64(c))
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.cache.Bytes()+c > cacheLimit || blockSize(c) != c {
		d.cfg.pool.drop(uint64(c))
		return
	}
	d.cache.Put(c, raw, c)
}

// refBuffers counts a submitted batch's use of its buffers (delta +1), or
// its end (-1).
func refBuffers(cmds []gpu.Command, delta int32) {
	for _, c := range cmds {
		switch c := c.(type) {
		case gpu.Fill:
			ref(c.Dst, delta)
		case gpu.Arange:
			ref(c.Dst, delta)
		case gpu.Copy:
			ref(c.Dst, delta)
			ref(c.Src, delta)
		case gpu.Add:
			ref(c.Dst, delta)
			ref(c.A, delta)
			ref(c.B, delta)
		case gpu.Scale:
			ref(c.Dst, delta)
			ref(c.Src, delta)
		}
	}
}

func ref(b gpu.Buffer, delta int32) {
	sb := b.(*buffer)
	if delta > 0 {
		sb.refs.Add(delta)
	} else {
		sb.unref()
	}
}
