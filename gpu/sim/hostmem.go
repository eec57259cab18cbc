package sim

import (
	"sync"
	"sync/atomic"
)

// Headroom left to the Go runtime beyond the sim's blocks (its own heap,
// garbage between collections, stacks): an eighth of what is available,
// at least minHeadroom. Below 2*minHeadroom the sim takes half.
const (
	minHeadroom = 256 << 20
	headroomDiv = 8
)

// HostMemoryBytes returns the memory that the sim devices of this process
// may hold together, and that a device reports and enforces unless
// WithMemoryBytes (or CHOREO_SIM_MEMORY_BYTES) says otherwise: the least
// of what the process's memory cgroup still allows, the host's
// MemAvailable and what RLIMIT_AS leaves of the address space, minus
// headroom for the Go runtime, read once per process. Where none of these
// can be read (not Linux), it is DefaultMemoryBytes.
func HostMemoryBytes() uint64 { return hostBudget() }

var hostBudget = sync.OnceValue(func() uint64 {
	avail, ok := hostAvailable()
	if !ok {
		return DefaultMemoryBytes
	}
	return budgetFrom(avail)
})

// budgetFrom is the sim's share of avail available bytes.
func budgetFrom(avail uint64) uint64 {
	h := max(minHeadroom, avail/headroomDiv)
	if avail < 2*h {
		return avail / 2
	}
	return avail - h
}

// hostPool accounts for the Go memory that sim devices hold: a take
// reserves a block's bytes before the block is made, so that an allocation
// too large for the host fails with gpu.ErrOutOfMemory instead of the Go
// runtime's fatal out-of-memory. held counts live and cached blocks;
// dropped counts blocks given up to the collector since the last
// collection a device forced, which may still occupy the heap. The devices
// of a process share one pool (processPool); tests make their own.
type hostPool struct {
	budget  uint64
	held    atomic.Uint64
	dropped atomic.Uint64
}

// processPool is the pool of every device made by New.
var processPool = sync.OnceValue(func() *hostPool { return &hostPool{budget: hostBudget()} })

// take reserves n bytes if held, dropped and n fit the budget.
func (p *hostPool) take(n uint64) bool {
	for {
		h := p.held.Load()
		if h+p.dropped.Load()+n > p.budget || h+n < h {
			return false
		}
		if p.held.CompareAndSwap(h, h+n) {
			return true
		}
	}
}

// release returns n held bytes of a small block, left to the collector's
// usual pace.
func (p *hostPool) release(n uint64) { p.held.Add(-n) }

// drop gives up n held bytes of large blocks to the collector.
func (p *hostPool) drop(n uint64) {
	p.held.Add(-n)
	p.dropped.Add(n)
}

// collected records that a collection reclaimed the n dropped bytes seen
// before it started.
func (p *hostPool) collected(n uint64) { p.dropped.Add(-n) }
