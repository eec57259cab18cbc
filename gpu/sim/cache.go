package sim

import (
	"math/bits"

	"github.com/choreo-gpu/choreo/gpu"
)

// The block cache: fresh Go memory for a large buffer costs page faults and
// clearing on every allocation (a 64 MiB output per collective made the
// sim's out-of-place all-reduce ten times slower than in place), so blocks
// of cacheMin bytes or more are rounded up to a power of two and reused.
const (
	cacheMin   = 64 << 10
	cacheLimit = 4 << 30 // bytes the cache may hold
)

// blockSize is the size of the block that holds n bytes.
func blockSize(n int) int {
	if n < cacheMin {
		return n
	}
	return 1 << bits.Len(uint(n-1))
}

// takeCached returns a cached block for n bytes, if there is one.
func (d *Device) takeCached(n int) ([]byte, bool) {
	if n < cacheMin {
		return nil, false
	}
	c := blockSize(n)
	d.mu.Lock()
	defer d.mu.Unlock()
	list := d.cache[c]
	if len(list) == 0 {
		return nil, false
	}
	raw := list[len(list)-1]
	d.cache[c] = list[:len(list)-1]
	d.cached -= c
	return raw, true
}

// putCached keeps a freed block for reuse, unless it is small, the cache
// is full or the device is closed.
func (d *Device) putCached(raw []byte) {
	c := len(raw) - (align - 1)
	if c < cacheMin {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.cached+c > cacheLimit {
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
