package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/dustin/go-humanize"
)

// The sweep's memory. Ranks in one process share its memory (and, on the
// sim, its RAM is their device memory), so the default sweep of in-process
// ranks stops at the largest size whose footprint fits inprocBudget.
const (
	// defaultMaxSize is the largest size per rank a sweep measures unless
	// told otherwise.
	defaultMaxSize = 64 << 20
	// inprocBudget bounds the estimated footprint of the default sweep of
	// in-process ranks (its buffers in use and the device's cache of freed
	// ones); the process's heap stays within about twice that.
	inprocBudget = 1 << 30
	// inprocMemLimit is the Go heap's soft limit for such a sweep, where
	// GOMEMLIMIT does not set one: the collector then keeps the buffers
	// freed by one size from piling up on the next.
	inprocMemLimit = 1536 << 20
)

// footprint estimates the bytes an in-process sweep of n ranks holds at
// size bytes per rank, at its worst op (all-gather: each rank's output is
// n times its input, and window ops are in flight), with a third more for
// the device's cache of freed buffers of the smaller sizes.
func footprint(n, size int) int {
	return (window*n*n + n) * size * 4 / 3
}

// resolveMaxSize sets --max-size where it was left at 0 (auto):
// defaultMaxSize, or for n in-process ranks the largest size of the sweep
// (min-size times a power of factor) whose footprint fits inprocBudget,
// noted in f.capped.
func (f *benchFlags) resolveMaxSize(inproc bool, n int) {
	if f.MaxSize != 0 {
		return
	}
	f.MaxSize = defaultMaxSize
	if !inproc || f.Factor < 2 || f.MinSize < 1 || n < 1 {
		return
	}
	fit := sizeFlag(0)
	for s := f.MinSize; s <= defaultMaxSize && footprint(n, int(s)) <= inprocBudget; s *= sizeFlag(f.Factor) {
		fit = s
	}
	if fit == 0 || fit >= f.MaxSize {
		return
	}
	f.MaxSize, f.capped = fit, true
}

// limitHeap bounds the Go heap of a sweep resolveMaxSize capped, unless
// GOMEMLIMIT sets a bound already.
func (f *benchFlags) limitHeap() {
	if f.capped && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(inprocMemLimit)
	}
}

// noteCapped says why the sweep of n ranks stops where it does.
func (f *benchFlags) noteCapped(out io.Writer, n int) {
	fmt.Fprintf(out, "sizes up to %s per rank: the %d in-process ranks share this process's memory (--max-size 64MiB goes further, in several GiB)\n",
		humanize.IBytes(uint64(f.MaxSize)), n)
}
