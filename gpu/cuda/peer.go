//go:build linux

package cuda

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/choreo-gpu/choreo/gpu"
)

// peerTable is the CUDA gpu.PeerTable. Its words live in pinned,
// device-mapped host memory, where the CPU writes them: [0] armed, [1] the
// kernels' error flag, then (device pointer, bytes) per entry. A PeerReduce
// copies the table into device memory on the stream right before its
// kernel: the copy runs when the stream gets there (after the fence wait
// that the CPU raises once the table is filled), so the kernel reads what
// the CPU wrote, from cached device memory. Each entry holds a lease on its
// buffer until Free, so the memory is not given back while the table can
// name it.
type peerTable struct {
	dev   *Device
	n     int
	host  *buffer // HostMem, 16+16n bytes
	dtab  *buffer // DeviceMem copy for the kernel
	mu    sync.Mutex
	held  []*buffer
	armed atomic.Bool
	freed bool
}

var _ gpu.PeerTable = (*peerTable)(nil)

// NewPeerTable implements gpu.PeerDevice. It fails with gpu.ErrNoBackend
// when the loaded kernels lack the peer kernels (a PTX older than them).
func (d *Device) NewPeerTable(n int) (gpu.PeerTable, error) {
	if n <= 0 {
		return nil, badArgf("peer table of %d entries", n)
	}
	if d.kern == nil || d.kern.peer == nil {
		return nil, noPeerKernels()
	}
	size := 16 + 16*n
	hb, err := d.Alloc(size, gpu.HostMem)
	if err != nil {
		return nil, err
	}
	db, err := d.Alloc(size, gpu.DeviceMem)
	if err != nil {
		hb.Free()
		return nil, err
	}
	t := &peerTable{dev: d, n: n, host: hb.(*buffer), dtab: db.(*buffer), held: make([]*buffer, n)}
	clear(t.host.bytes)
	return t, nil
}

func (t *peerTable) Len() int { return t.n }

func (t *peerTable) words() []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(t.host.bytes))), 2+2*t.n)
}

func (t *peerTable) Set(i int, b gpu.Buffer) error {
	cb, ok := b.(*buffer)
	switch {
	case i < 0 || i >= t.n:
		return badArgf("peer table: entry %d of %d", i, t.n)
	case !ok || cb.dev != t.dev:
		return badArgf("peer table: entry %d: a buffer of another device", i)
	case t.armed.Load():
		return badArgf("peer table: set after arm")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.freed {
		return closedf("peer table freed")
	}
	if !cb.l.acquire() {
		return closedf("peer table: entry %d: buffer freed", i)
	}
	if old := t.held[i]; old != nil {
		old.l.drop()
	}
	t.held[i] = cb
	w := t.words()
	w[2+2*i], w[3+2*i] = uint64(cb.dptr), uint64(cb.n)
	return nil
}

func (t *peerTable) Arm() {
	t.armed.Store(true)
	atomic.StoreUint64(&t.words()[0], 1)
}

func (t *peerTable) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.freed && atomic.LoadUint64(&t.words()[1]) != 0 {
		return badArgf("peer reduce: a table entry too short for the command's range")
	}
	return nil
}

func (t *peerTable) Free() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.freed {
		return nil
	}
	t.freed = true
	for i, b := range t.held {
		if b != nil {
			b.l.drop()
			t.held[i] = nil
		}
	}
	t.host.Free()
	t.dtab.Free()
	return nil
}

// peerReduce issues a PeerReduce: the table's copy into device memory, then
// the kernel.
func (k *kernels) peerReduce(a *api, s cuStream, c gpu.PeerReduce) (int, error) {
	t := c.Table.(*peerTable)
	if t.host.l.isFreed() || t.dtab.l.isFreed() {
		return 0, closedf("peer reduce: table freed")
	}
	op, dt := c.Op, c.DType
	if c.SrcHi-c.SrcLo == 1 {
		// A copy, bit for bit: the integer kernel of the element's width
		// moves the bits (a float kernel would quiet a signaling NaN).
		op, dt = gpu.OpSum, sameWidthInt[dt]
	}
	name := "peer_" + op.String() + "_" + dtypeSuffix[dt]
	f, ok := k.peer[name]
	if !ok {
		return 0, badArgf("peer reduce: no kernel %s", name)
	}
	if err := a.errorf("cuMemcpyAsync", a.cuMemcpyAsync(t.dtab.dptr, t.host.dptr, uint64(t.host.n), s)); err != nil {
		return 0, err
	}
	var args kernelArgs
	args.reset(9)
	args.ptr(t.dtab.dptr)
	args.ptr(t.host.dptr + 8)
	args.i32(int32(c.SrcLo))
	args.i32(int32(c.SrcHi))
	args.i32(int32(c.DstLo))
	args.i32(int32(c.DstHi))
	args.i64(int64(c.SrcOff))
	args.i64(int64(c.DstOff))
	args.i64(int64(c.N))
	// One thread per 16 bytes: the kernel reads 16-byte vectors where the
	// entries are aligned (its grid-stride loops cover any n otherwise).
	return 2, a.launch(f, name, (c.N*dt.Size()+15)/16, blockThreads, s, &args)
}

// sameWidthInt is the integer dtype of each dtype's width.
var sameWidthInt = map[gpu.DType]gpu.DType{
	gpu.Float32: gpu.Int32, gpu.Float64: gpu.Int64, gpu.Float16: gpu.Int16, gpu.BFloat16: gpu.Int16,
	gpu.Int8: gpu.Int8, gpu.Int16: gpu.Int16, gpu.Int32: gpu.Int32, gpu.Int64: gpu.Int64, gpu.Uint8: gpu.Uint8,
}

// noPeerKernels is NewPeerTable's error on a PTX without the peer kernels.
func noPeerKernels() error {
	return fmt.Errorf("cuda: the loaded kernels have no peer reduce (regenerate kernels/ops.ptx): %w (%w)", ErrNoKernels, gpu.ErrNoBackend)
}
