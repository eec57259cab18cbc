package gputest

import (
	"bytes"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// testProperties: a device names its backend and its memory.
func testProperties(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	p := r.dev.Properties()
	if p.Backend == "" || p.Name == "" {
		t.Errorf("Properties %+v: empty backend or name", p)
	}
	if p.MemoryBytes == 0 {
		t.Errorf("Properties %+v: no memory", p)
	}
}

// testAlloc: buffers have the asked size and kind, HostMem starts zeroed and is
// CPU visible, n = 0 works, n < 0 is a bad argument, Free is idempotent.
func testAlloc(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	for _, kind := range []gpu.MemKind{gpu.DeviceMem, gpu.HostMem} {
		b := r.rawAlloc(4099, kind)
		if got := r.read(q, b, 0, b.Len()); kind == gpu.HostMem && !bytes.Equal(got, make([]byte, len(got))) {
			t.Errorf("new %v buffer is not zero-filled", kind)
		}
		z := r.alloc(0, kind)
		if z.Len() != 0 {
			t.Errorf("Alloc(0, %v).Len() = %d", kind, z.Len())
		}
		if _, err := r.dev.Alloc(-1, kind); err == nil {
			t.Errorf("Alloc(-1, %v) succeeded", kind)
		} else {
			expectErr(t, "Alloc(-1)", err, gpu.ErrBadArgument)
		}
		if err := b.Free(); err != nil {
			t.Errorf("Free: %v", err)
		}
		if err := b.Free(); err != nil {
			t.Errorf("second Free: %v", err)
		}
	}
	h := r.alloc(64, gpu.HostMem)
	if len(h.Bytes()) != 64 {
		t.Errorf("HostMem Bytes() has length %d, want 64", len(h.Bytes()))
	}
	if r.dev.Properties().HostVisibleDeviceMem {
		d := r.alloc(64, gpu.DeviceMem)
		if len(d.Bytes()) != 64 {
			t.Errorf("HostVisibleDeviceMem, but DeviceMem Bytes() has length %d", len(d.Bytes()))
		}
	}
	w := r.word()
	w.Free()
	w.Free()
}

// testCopyRoundTrip: host -> device -> device -> host copies with offsets
// keep every byte, and touch nothing outside their ranges.
func testCopyRoundTrip(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	const n = 1024 + 3
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	h := r.alloc(n, gpu.HostMem)
	copy(h.Bytes(), src)
	d1 := r.alloc(n+16, gpu.DeviceMem)
	d2 := r.alloc(n+32, gpu.DeviceMem)
	back := r.alloc(n, gpu.HostMem)
	r.mustRun(q,
		gpu.Copy{Dst: d1, DstOff: 5, Src: h, Bytes: n},
		gpu.Copy{Dst: d2, DstOff: 17, Src: d1, SrcOff: 5, Bytes: n},
		gpu.Copy{Dst: back, Src: d2, SrcOff: 17, Bytes: n},
	)
	if !bytes.Equal(back.Bytes(), src) {
		t.Fatalf("round trip changed the data")
	}
	got := r.read(q, d2, 0, d2.Len())
	if !bytes.Equal(got[:17], make([]byte, 17)) || !bytes.Equal(got[17+n:], make([]byte, 32-17)) {
		t.Errorf("copy wrote outside its destination range")
	}

	// Zero bytes, an identical range, disjoint ranges of one buffer, host to host.
	h2 := r.alloc(n, gpu.HostMem)
	r.mustRun(q,
		gpu.Copy{Dst: d1, Src: h, Bytes: 0},
		gpu.Copy{Dst: d1, DstOff: 5, Src: d1, SrcOff: 5, Bytes: n},
		gpu.Copy{Dst: d1, DstOff: 0, Src: d1, SrcOff: 8, Bytes: 8},
		gpu.Copy{Dst: h2, Src: h, Bytes: n},
	)
	if !bytes.Equal(h2.Bytes(), src) {
		t.Errorf("host to host copy changed the data")
	}
	got = r.read(q, d1, 0, 16)
	if want := append(append([]byte{}, src[3:11]...), src[3:11]...); !bytes.Equal(got, want) {
		// d1[0:8] = d1[8:16] = src[3:11] (d1 holds src from offset 5).
		t.Errorf("same-buffer copy: got % x, want % x", got, want)
	}
}

// testFreedBuffer: a command naming a freed buffer fails with ErrClosed,
// from Submit or through done.
func testFreedBuffer(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	q := r.queue()
	b := r.alloc(64, gpu.DeviceMem)
	ok := r.alloc(64, gpu.DeviceMem)
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	batches := [][]gpu.Command{
		{gpu.Fill{Dst: b, DType: gpu.Float32, N: 4, Value: gpu.Float(1)}},
		{gpu.Copy{Dst: ok, Src: b, Bytes: 8}},
		{gpu.Add{Dst: ok, A: ok, B: b, DType: gpu.Int8, N: 8}},
	}
	for _, cmds := range batches {
		c := newCompletion()
		err := q.Submit(cmds, c.done)
		if err == nil {
			err = r.wait(c)
		}
		expectErr(t, cmds[0].String()+" on a freed buffer", err, gpu.ErrClosed)
	}
	r.mustRun(q, gpu.Fill{Dst: ok, DType: gpu.Int64, N: 8, Value: gpu.Int(1)})
}
