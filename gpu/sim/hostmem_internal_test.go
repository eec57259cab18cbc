package sim

import (
	"errors"
	"runtime"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// withPool makes a device draw its blocks from p instead of the process's
// pool.
func withPool(p *hostPool) Option { return func(c *config) { c.pool = p } }

func newPoolDev(t *testing.T, p *hostPool, opts ...Option) *Device {
	t.Helper()
	d, err := New(append(opts, withPool(p))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// totalAlloc is the bytes the Go heap has handed out so far.
func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestAllocAboveSizeTakesNoMemory: an allocation above the device's size
// (by default the host's, HostMemoryBytes) fails with ErrOutOfMemory
// before any Go memory is taken, for both kinds.
func TestAllocAboveSizeTakesNoMemory(t *testing.T) {
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	size := d.Properties().MemoryBytes
	if size != HostMemoryBytes() || size == 0 {
		t.Fatalf("device size %d, want HostMemoryBytes %d", size, HostMemoryBytes())
	}
	for _, kind := range []gpu.MemKind{gpu.DeviceMem, gpu.HostMem} {
		before := totalAlloc()
		_, err := d.Alloc(int(size)+1, kind)
		grew := totalAlloc() - before
		if !errors.Is(err, gpu.ErrOutOfMemory) {
			t.Errorf("%v: Alloc(%d) above the size: %v, want ErrOutOfMemory", kind, size+1, err)
		}
		if grew > 1<<20 {
			t.Errorf("%v: the refused Alloc took %d bytes of Go memory", kind, grew)
		}
	}
}

// TestHostPoolBoundsDevices: the host pool bounds every device drawing
// from it, whatever size the device claims; the refusal takes no memory;
// near the limit a block is made to measure instead of to its size class;
// cached blocks are given back (and collected) before an allocation fails.
func TestHostPoolBoundsDevices(t *testing.T) {
	const mib = 1 << 20
	p := &hostPool{budget: 6 * mib}
	d1 := newPoolDev(t, p, WithMemoryBytes(1<<40))
	d2 := newPoolDev(t, p, WithMemoryBytes(1<<40))

	before := totalAlloc()
	if _, err := d1.Alloc(7*mib, gpu.DeviceMem); !errors.Is(err, gpu.ErrOutOfMemory) {
		t.Fatalf("Alloc above the host's budget: %v", err)
	}
	if grew := totalAlloc() - before; grew > mib {
		t.Errorf("the refused Alloc took %d bytes of Go memory", grew)
	}

	a := must(t)(d1.Alloc(4*mib+1, gpu.DeviceMem)) // class 8 MiB would not fit: made to measure
	if got := p.held.Load(); got != 4*mib+1 {
		t.Errorf("held %d after a made-to-measure block, want %d", got, 4*mib+1)
	}
	b := must(t)(d2.Alloc(mib, gpu.HostMem)) // the other device shares the budget
	if _, err := d2.Alloc(mib, gpu.HostMem); !errors.Is(err, gpu.ErrOutOfMemory) {
		t.Errorf("Alloc beyond the shared budget: %v", err)
	}
	_ = a.Free() // not a class size: not cached, dropped
	_ = b.Free() // cached by d2
	if p.dropped.Load() != 4*mib+1 || d2.cache.Bytes() != mib {
		t.Errorf("after Free: dropped %d, d2 cached %d", p.dropped.Load(), d2.cache.Bytes())
	}
	// 5 MiB needs d2's cache given up and the dropped blocks collected.
	c := must(t)(d2.Alloc(5*mib, gpu.DeviceMem))
	if d2.cache.Bytes() != 0 || p.held.Load() != 5*mib || p.dropped.Load() != 0 {
		t.Errorf("after the collection: cached %d, held %d, dropped %d", d2.cache.Bytes(), p.held.Load(), p.dropped.Load())
	}
	_ = c.Free()
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	if h := p.held.Load(); h != 0 {
		t.Errorf("closed devices still hold %d bytes", h)
	}
}

func must(t *testing.T) func(gpu.Buffer, error) gpu.Buffer {
	return func(b gpu.Buffer, err error) gpu.Buffer {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// TestBlockSizeWaste: size classes waste at most an eighth above fineMin.
func TestBlockSizeWaste(t *testing.T) {
	for _, n := range []int{0, 1, cacheMin - 1, cacheMin, cacheMin + 1, 3 << 20, fineMin, fineMin + 1,
		fineMin*3/2 + 7, 10 << 30, 10<<30 + 1, 16<<30 - 1} {
		c := blockSize(n)
		if c < n || blockSize(c) != c {
			t.Errorf("blockSize(%d) = %d: not a class holding n", n, c)
		}
		if n > fineMin && c-n > n/8 {
			t.Errorf("blockSize(%d) = %d wastes more than an eighth", n, c)
		}
	}
}
