package algo

import (
	"math/bits"
	"sync"
)

// scratch buffers (ring receive slots, doubling's partner buffer) are
// recycled by power-of-two size class, so a collective does not allocate
// and zero megabytes per call. They are kept in sync.Pools, not in an
// internal/pool.Lists: they are plain Go memory, which the collector may
// take back when idle, so they need no owner, bound or count. A buffer
// goes back only after every transport call that used it has returned (the
// Transport contract: a returned Recv no longer writes its buffer).
var scratchPools [48]sync.Pool

func getScratch(n int) []byte {
	if n <= 0 {
		return nil
	}
	c := bits.Len(uint(n - 1))
	if c >= len(scratchPools) {
		return make([]byte, n)
	}
	if v, ok := scratchPools[c].Get().(*[]byte); ok {
		return (*v)[:n]
	}
	return make([]byte, n, 1<<c)
}

func putScratch(b []byte) {
	c := bits.Len(uint(cap(b) - 1))
	if cap(b) == 0 || c >= len(scratchPools) || 1<<c != cap(b) {
		return
	}
	b = b[:cap(b)]
	scratchPools[c].Put(&b)
}
