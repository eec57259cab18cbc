package sim

import (
	"math/bits"

	"github.com/choreo-gpu/choreo/gpu"
)

// The block cache: fresh Go memory for a large buffer costs page faults and
// clearing on every allocation (a 64 MiB output per collective made the
// sim's out-of-place all-reduce ten times slower than in place), so blocks
// of cacheMin bytes or more are rounded up to a size class and reused.
// Classes are powers of two up to fineMin; above it every power of two is
// cut in fineSteps, so that rounding wastes at most an eighth of a large
// block (its bytes count against the host's memory).
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
	c := 1 << bits.Len(uint(n-1))
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
	c := blockSize(n)
	list := d.cache[c]
	if len(list) == 0 {
		return nil
	}
	raw := list[len(list)-1]
	list[len(list)-1] = nil
	d.cache[c] = list[:len(list)-1]
	d.cached -= c
	return raw
}

// dropCacheLocked gives every cached block up to the collector; d.mu is
// held.
func (d *Device) dropCacheLocked() {
	if d.cached > 0 {
		d.cfg.pool.drop(uint64(d.cached))
	}
	d.cache, d.cached = nil, 0
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
	if d.closed || d.cached+c > cacheLimit || blockSize(c) != c {
		d.cfg.pool.drop(uint64(c))
		return
	}
	if d.cache == nil {
		d.cache = map[int][][]byte{}
	}
	d.cache[c] = append(d.cache[c], raw)
	d.cached += c
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
