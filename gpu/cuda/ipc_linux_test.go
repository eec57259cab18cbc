//go:build linux

package cuda

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// The IPC test runs the importer in a process of its own (this test
// binary, run again as TestIPCChild): CUDA IPC maps memory exported by
// another process only.

// Variables of the importing child's process.
const (
	ipcEnvHandles = "CHOREO_CUDA_IPC_TEST_HANDLES" // the exports, hex, comma separated
	ipcEnvID      = "CHOREO_CUDA_IPC_TEST_ID"      // the exporter's device ID, hex
	ipcEnvOrdinal = "CHOREO_CUDA_IPC_TEST_ORDINAL" // the exporter's device ordinal
)

// ipcChildOK is what the child prints once everything it checks passed.
const ipcChildOK = "CHILD OK"

// ipcSizes are the lengths of the exported buffers, in the order they
// travel: a 1 MiB buffer of its own allocation (cuMemAlloc, offset 0), and
// two odd-sized buffers carved from one device slab: the first at a
// nonzero offset in the slab, the second (its sibling) at another.
var ipcSizes = []int{1 << 20, 12345, 12345}

// ipcPattern is buffer i's pattern: the exporter fills it, the importer
// checks it and writes its complement (every byte differs) back.
func ipcPattern(n, i int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(j*131 + (j >> 8) + i*71 + 5)
	}
	return b
}

func ipcComplement(b []byte) []byte {
	c := make([]byte, len(b))
	for i, v := range b {
		c[i] = ^v
	}
	return c
}

// ipcCheck fails t unless got equals want, naming the first difference.
func ipcCheck(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	if bytes.Equal(got, want) {
		return
	}
	bad, first := 0, -1
	for i := range got {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	t.Fatalf("%s: %d of %d bytes differ, the first at %d: %#02x, want %#02x", what, bad, len(got), first, got[first], want[first])
}

// ipcUpload copies data into dst (from its start) through a HostMem buffer.
func ipcUpload(t *testing.T, d *Device, q gpu.Queue, dst gpu.Buffer, data []byte) {
	t.Helper()
	host, err := d.Alloc(len(data), gpu.HostMem)
	if err != nil {
		t.Fatalf("alloc %d bytes of host memory: %v", len(data), err)
	}
	defer host.Free()
	copy(host.Bytes(), data)
	if err := run(t, q, gpu.Copy{Dst: dst, Src: host, Bytes: len(data)}); err != nil {
		t.Fatalf("upload %d bytes: %v", len(data), err)
	}
}

// ipcRead returns a copy of src's bytes, read through a HostMem buffer by
// a Copy command.
func ipcRead(t *testing.T, d *Device, q gpu.Queue, src gpu.Buffer) []byte {
	t.Helper()
	host, err := d.Alloc(src.Len(), gpu.HostMem)
	if err != nil {
		t.Fatalf("alloc %d bytes of host memory: %v", src.Len(), err)
	}
	defer host.Free()
	if err := run(t, q, gpu.Copy{Dst: host, Src: src, Bytes: src.Len()}); err != nil {
		t.Fatalf("read back %d bytes: %v", src.Len(), err)
	}
	return bytes.Clone(host.Bytes())
}

// ipcPeerCopy copies n bytes from src to dst with a one-source PeerReduce
// over a two-entry table (src, dst): the collectives' device path.
func ipcPeerCopy(t *testing.T, d *Device, q gpu.Queue, src, dst gpu.Buffer, n int) {
	t.Helper()
	tab, err := d.NewPeerTable(2)
	if err != nil {
		t.Fatalf("NewPeerTable: %v", err)
	}
	defer tab.Free()
	if err := tab.Set(0, src); err != nil {
		t.Fatalf("table Set(0, source): %v", err)
	}
	if err := tab.Set(1, dst); err != nil {
		t.Fatalf("table Set(1, destination): %v", err)
	}
	tab.Arm()
	if err := run(t, q, gpu.PeerReduce{Table: tab, SrcLo: 0, SrcHi: 1, DstLo: 1, DstHi: 2,
		N: n, DType: gpu.Uint8, Op: gpu.OpSum}); err != nil {
		t.Fatalf("peer copy of %d bytes: %v", n, err)
	}
	if err := tab.Err(); err != nil {
		t.Fatalf("peer copy of %d bytes: table Err: %v", n, err)
	}
}

// TestIPCAcrossProcesses: buffers exported by this process are mapped by a
// child process on the same GPU (TestIPCChild), which reads this
// process's pattern through its imports and writes its complement back
// through them; this process then finds the complement in its buffers.
// The buffers are a 1 MiB one and two 12345-byte ones carved from one
// slab, so that the handles carry nonzero offsets and two handles name
// the same allocation.
func TestIPCAcrossProcesses(t *testing.T) {
	d := openDev(t, Options{})
	q := mustQueue(t, d)
	// Allocated first, on a fresh device: the small ones come from one new
	// slab (the first at its base, the second from the slab's other
	// blocks, cached when it was carved).
	bufs := make([]gpu.Buffer, len(ipcSizes))
	for i, n := range ipcSizes {
		b, err := d.Alloc(n, gpu.DeviceMem)
		if err != nil {
			t.Fatalf("alloc %d bytes of device memory: %v", n, err)
		}
		bufs[i] = b
	}
	bufs[1], bufs[2] = bufs[2], bufs[1] // the one at the slab's base travels last
	pats := make([][]byte, len(bufs))
	for i, b := range bufs {
		pats[i] = ipcPattern(b.Len(), i)
		ipcUpload(t, d, q, b, pats[i])
		ipcCheck(t, fmt.Sprintf("buffer %d before the export", i), ipcRead(t, d, q, b), pats[i])
	}

	handles := make([]gpu.IPCHandle, len(bufs))
	enc := make([]string, len(bufs))
	for i, b := range bufs {
		h, err := d.Export(b)
		if err != nil {
			t.Fatalf("Export(buffer %d, %d bytes): %v", i, b.Len(), err)
		}
		if h.Len != uint64(b.Len()) {
			t.Fatalf("Export(buffer %d): handle length %d, want %d", i, h.Len, b.Len())
		}
		if h.Mem == ([64]byte{}) {
			t.Fatalf("Export(buffer %d): an all-zero driver handle", i)
		}
		again, err := d.Export(b)
		if err != nil || again != h {
			t.Fatalf("Export(buffer %d) again: %v, %v; want %v as before", i, again, err, h)
		}
		t.Logf("buffer %d: %v", i, h)
		handles[i] = h
		enc[i] = hex.EncodeToString(h.Encode())
	}
	if handles[1].Offset == 0 {
		t.Fatalf("the carved buffer's handle has offset 0 (%v); want one inside its slab", handles[1])
	}
	d.ipc.mu.Lock()
	base1, base2 := d.ipc.exports[bufs[1].(*buffer).dptr].base, d.ipc.exports[bufs[2].(*buffer).dptr].base
	d.ipc.mu.Unlock()
	if base1 == 0 || base1 != base2 {
		t.Fatalf("the two carved buffers lie in allocations %#x and %#x; want one slab", base1, base2)
	}
	if handles[1].Offset == handles[2].Offset {
		t.Fatalf("the two carved buffers' handles have the same offset %d", handles[1].Offset)
	}
	t.Logf("the driver's handles of the two carved buffers (one slab) are identical: %v", handles[1].Mem == handles[2].Mem)

	id := d.ID()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestIPCChild$", "-test.count=1", "-test.v", "-test.timeout=50s")
	cmd.Env = append(os.Environ(),
		ipcEnvHandles+"="+strings.Join(enc, ","),
		ipcEnvID+"="+hex.EncodeToString(id[:]),
		ipcEnvOrdinal+"="+strconv.Itoa(d.Ordinal()))
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), ipcChildOK) {
		t.Fatalf("child: %v (want exit 0 and %q)\n%s", err, ipcChildOK, out)
	}
	t.Logf("child:\n%s", out)

	for i, b := range bufs {
		ipcCheck(t, fmt.Sprintf("buffer %d after the child wrote it", i), ipcRead(t, d, q, b), ipcComplement(pats[i]))
	}
}

// TestIPCChild is the importing process of TestIPCAcrossProcesses; it
// skips in a normal run. For each handle it imports the range twice (both
// aliases must work: the mapping is cached), copies the exporter's pattern
// into a buffer of its own with a PeerReduce and checks it, reads it
// through the second alias with a plain Copy, frees the first alias, then
// writes the pattern's complement into the exporter's memory through the
// second (PeerReduce from a buffer of its own) and reads it back. It
// prints ipcChildOK once all passed and the device closed cleanly.
func TestIPCChild(t *testing.T) {
	encHandles := os.Getenv(ipcEnvHandles)
	if encHandles == "" {
		t.Skip("helper: runs in the child process of TestIPCAcrossProcesses")
	}
	ordinal, err := strconv.Atoi(os.Getenv(ipcEnvOrdinal))
	if err != nil {
		t.Fatalf("%s=%q: %v", ipcEnvOrdinal, os.Getenv(ipcEnvOrdinal), err)
	}
	wantID, err := hex.DecodeString(os.Getenv(ipcEnvID))
	if err != nil || len(wantID) != 16 {
		t.Fatalf("%s=%q: %v", ipcEnvID, os.Getenv(ipcEnvID), err)
	}
	var handles []gpu.IPCHandle
	for i, s := range strings.Split(encHandles, ",") {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatalf("handle %d: %v", i, err)
		}
		h, err := gpu.DecodeIPCHandle(b)
		if err != nil {
			t.Fatalf("handle %d: %v", i, err)
		}
		handles = append(handles, h)
	}
	if len(handles) != len(ipcSizes) {
		t.Fatalf("%d handles, want %d", len(handles), len(ipcSizes))
	}

	// The parent opened this GPU: any failure to open it here is the
	// test's failure, not a reason to skip.
	d, err := New(Options{Ordinal: ordinal})
	if err != nil {
		t.Fatalf("cuda.New(ordinal %d): %v", ordinal, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if id := d.ID(); !bytes.Equal(id[:], wantID) {
		t.Fatalf("device ID %x, the exporter's %x: not the same GPU", id, wantID)
	}
	q := mustQueue(t, d)

	mems := map[[64]byte]bool{}
	for i, h := range handles {
		n := ipcSizes[i]
		if h.Len != uint64(n) {
			t.Fatalf("handle %d: length %d, want %d", i, h.Len, n)
		}
		mems[h.Mem] = true
		pat := ipcPattern(n, i)
		a1, err := d.Import(h)
		if err != nil {
			t.Fatalf("Import(handle %d %v): %v", i, h, err)
		}
		a2, err := d.Import(h)
		if err != nil {
			t.Fatalf("Import(handle %d %v) a second time: %v", i, h, err)
		}
		for _, a := range []gpu.Buffer{a1, a2} {
			if a.Len() != n || a.Kind() != gpu.DeviceMem || a.Bytes() != nil {
				t.Fatalf("import of handle %d: Len %d, Kind %v, Bytes nil %v; want %d, device, nil", i, a.Len(), a.Kind(), a.Bytes() == nil, n)
			}
		}
		if p1, p2 := a1.(*buffer).dptr, a2.(*buffer).dptr; p1 == 0 || p1 != p2 {
			t.Fatalf("handle %d imported twice at %#x and %#x; want one cached mapping", i, p1, p2)
		}

		// Read through the first alias with a PeerReduce, through the
		// second with a plain Copy.
		own, err := d.Alloc(n, gpu.DeviceMem)
		if err != nil {
			t.Fatalf("alloc %d bytes: %v", n, err)
		}
		ipcPeerCopy(t, d, q, a1, own, n)
		ipcCheck(t, fmt.Sprintf("handle %d: peer copy of the first import", i), ipcRead(t, d, q, own), pat)
		ipcCheck(t, fmt.Sprintf("handle %d: copy of the second import", i), ipcRead(t, d, q, a2), pat)

		// Freeing one alias ends that alias only.
		if err := a1.Free(); err != nil {
			t.Fatalf("handle %d: Free of the first import: %v", i, err)
		}
		tab, err := d.NewPeerTable(1)
		if err != nil {
			t.Fatalf("NewPeerTable: %v", err)
		}
		if err := tab.Set(0, a1); !errors.Is(err, gpu.ErrClosed) {
			t.Errorf("handle %d: table Set of the freed import: %v, want ErrClosed", i, err)
		}
		tab.Free()

		// Write the complement into the exporter's memory through the
		// second alias.
		comp := ipcComplement(pat)
		src, err := d.Alloc(n, gpu.DeviceMem)
		if err != nil {
			t.Fatalf("alloc %d bytes: %v", n, err)
		}
		ipcUpload(t, d, q, src, comp)
		ipcPeerCopy(t, d, q, src, a2, n)
		ipcCheck(t, fmt.Sprintf("handle %d: the second import after the write through it", i), ipcRead(t, d, q, a2), comp)

		// A third import after a free still finds the mapping.
		a3, err := d.Import(h)
		if err != nil {
			t.Fatalf("Import(handle %d) after a Free of an import: %v", i, err)
		}
		if p3, p2 := a3.(*buffer).dptr, a2.(*buffer).dptr; p3 != p2 {
			t.Fatalf("handle %d: third import at %#x, the second at %#x", i, p3, p2)
		}
		ipcCheck(t, fmt.Sprintf("handle %d: the third import", i), ipcRead(t, d, q, a3), comp)
		for _, b := range []gpu.Buffer{a2, a3, own, src} {
			if err := b.Free(); err != nil {
				t.Fatalf("handle %d: Free: %v", i, err)
			}
		}
		t.Logf("handle %d (%v): read, written and read back through its imports", i, h)
	}
	d.ipc.mu.Lock()
	mapped := len(d.ipc.imports)
	d.ipc.mu.Unlock()
	if mapped != len(mems) {
		t.Errorf("%d mappings for %d distinct driver handles; want one each", mapped, len(mems))
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := d.Import(handles[0]); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("Import after Close: %v, want ErrClosed", err)
	}
	if !t.Failed() {
		fmt.Printf("%s pid=%d handles=%d mappings=%d\n", ipcChildOK, os.Getpid(), len(handles), mapped)
	}
}

// TestIPCExportRefusals: Export takes only live DeviceMem buffers of its
// own device; a zero-length buffer exports as the zero handle, which
// Import turns into an empty buffer; a closed device neither imports nor
// exports. No second process is needed.
func TestIPCExportRefusals(t *testing.T) {
	d := openDev(t, Options{})
	if id := d.ID(); id == ([16]byte{}) {
		t.Errorf("device ID is all zero")
	}
	if _, err := d.Export(nil); !errors.Is(err, gpu.ErrBadArgument) {
		t.Errorf("Export(nil): %v, want ErrBadArgument", err)
	}
	host, err := d.Alloc(4096, gpu.HostMem)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Export(host); !errors.Is(err, gpu.ErrBadArgument) {
		t.Errorf("Export(HostMem buffer): %v, want ErrBadArgument", err)
	}
	freed, err := d.Alloc(4096, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	freed.Free()
	if _, err := d.Export(freed); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("Export(freed buffer): %v, want ErrClosed", err)
	}

	empty, err := d.Alloc(0, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	h0, err := d.Export(empty)
	if err != nil || h0 != (gpu.IPCHandle{}) {
		t.Errorf("Export(zero-length buffer): %v, %v; want the zero handle, nil", h0, err)
	}
	e, err := d.Import(h0)
	if err != nil {
		t.Fatalf("Import(zero handle): %v", err)
	}
	if e.Len() != 0 || e.Kind() != gpu.DeviceMem {
		t.Errorf("Import(zero handle): Len %d, Kind %v; want 0, device", e.Len(), e.Kind())
	}
	if err := e.Free(); err != nil {
		t.Errorf("Free of an empty import: %v", err)
	}

	live, err := d.Alloc(4096, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	h, err := d.Export(live)
	if err != nil {
		t.Fatalf("Export(live buffer): %v", err)
	}
	if h.Len != 4096 {
		t.Errorf("Export(live buffer): length %d, want 4096", h.Len)
	}

	// A second Device on the same GPU: same ID, but its buffers are not
	// d's to export; once closed it neither imports nor exports.
	d2 := openDev(t, Options{Ordinal: d.Ordinal()})
	if d2.ID() != d.ID() {
		t.Errorf("two devices of ordinal %d: IDs %x and %x", d.Ordinal(), d2.ID(), d.ID())
	}
	other, err := d2.Alloc(4096, gpu.DeviceMem)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Export(other); !errors.Is(err, gpu.ErrBadArgument) {
		t.Errorf("Export(a buffer of another device): %v, want ErrBadArgument", err)
	}
	if err := d2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := d2.Import(h); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("Import(%v) after Close: %v, want ErrClosed", h, err)
	}
	if _, err := d2.Import(gpu.IPCHandle{}); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("Import(zero handle) after Close: %v, want ErrClosed", err)
	}
	if _, err := d2.Export(other); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("Export after Close: %v, want ErrClosed", err)
	}
}
