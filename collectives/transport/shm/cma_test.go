package shm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// pattern fills a buffer of n bytes that differs per seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed ^ byte(i>>12)
	}
	return b
}

// singleCopy reads large messages wherever the host allows it, whether
// or not that pays here (see cmaPays).
func singleCopy(c *Config) { c.CMAMin = DefaultCMAMin }

// exchangeBig sends a message of n bytes each way between ranks 0 and 1
// under tag, at once, and checks the bytes.
func exchangeBig(t *testing.T, ts []*endpoint, tag transport.Tag, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type res struct {
		err error
		got []byte
	}
	out := make(chan error, 2)
	in := make(chan res, 2)
	for r := range 2 {
		go func() { out <- ts[r].Send(ctx, 1-r, tag, pattern(n, byte(r+1))) }()
		go func() {
			b := make([]byte, n)
			err := ts[r].Recv(ctx, 1-r, tag, b)
			if err == nil && string(b) != string(pattern(n, byte(2-r))) {
				err = errors.New("wrong bytes")
			}
			in <- res{err: err}
		}()
	}
	for range 2 {
		if err := <-out; err != nil {
			t.Fatalf("send of %d bytes: %v", n, err)
		}
		if r := <-in; r.err != nil {
			t.Fatalf("recv of %d bytes: %v", n, r.err)
		}
	}
}

// Large messages are read from the sender's memory, both ways, in one or
// several pieces, and arrive whole; smaller ones still go through the
// slots.
func TestSingleCopy(t *testing.T) {
	ts := build(t, 2, singleCopy)
	defer closeAll(ts)
	if ts[0].links[1].cmaPID == 0 || ts[1].links[0].cmaPID == 0 {
		t.Skip("this host does not let a process read its own memory by process_vm_readv")
	}
	sizes := []int{DefaultCMAMin, 1 << 20, 3*cmaPiece + 12345, 100 << 10}
	for i, n := range sizes {
		exchangeBig(t, ts, transport.Tag{Group: 1, Seq: uint64(i)}, n)
	}
	for r, tr := range ts {
		if got := tr.Stats().SingleCopies; got != 3 {
			t.Errorf("rank %d: %d messages read by address, want 3", r, got)
		}
	}
}

// With single copy off on either side, large messages go through the
// slots; the variable turns it off too.
func TestSingleCopyOff(t *testing.T) {
	for _, off := range []string{"both", "rank 0"} {
		ts := build(t, 2, func(c *Config) {
			if off == "both" || c.Rank == 0 {
				c.CMAMin = -1
			}
		})
		if ts[1].links[0].cmaPID != 0 {
			t.Errorf("%s off: rank 1 may read rank 0, which announced no probe", off)
		}
		for i, n := range []int{1 << 20, 5 << 20} {
			exchangeBig(t, ts, transport.Tag{Group: 2, Seq: uint64(i)}, n)
		}
		for r, tr := range ts {
			if got := tr.Stats().SingleCopies; got != 0 {
				t.Errorf("%s off: rank %d: %d messages read by address", off, r, got)
			}
		}
		closeAll(ts)
	}
	two := Config{Setup: msg.Setup{Rank: 0, Size: 2, Secret: testSecret}}
	t.Setenv(envCMA, "off")
	c, err := two.normalize()
	if err != nil || c.CMAMin >= 0 {
		t.Errorf("%s=off: CMAMin %d, %v", envCMA, c.CMAMin, err)
	}
	t.Setenv(envCMA, "")
	if c, err := two.normalize(); err != nil || c.CMAMin != DefaultCMAMin || !c.cmaAuto {
		t.Errorf("default: CMAMin %d (auto %v), %v", c.CMAMin, c.cmaAuto, err)
	}
	t.Setenv(envCMA, "1048576")
	if c, err := two.normalize(); err != nil || c.CMAMin != 1<<20 {
		t.Errorf("%s=1048576: CMAMin %d, %v", envCMA, c.CMAMin, err)
	}
	t.Setenv(envCMA, "auto")
	if c, err := two.normalize(); err != nil || c.CMAMin != DefaultCMAMin || !c.cmaAuto {
		t.Errorf("%s=auto: CMAMin %d (auto %v), %v", envCMA, c.CMAMin, c.cmaAuto, err)
	}
	t.Setenv(envCMA, "lots")
	if _, err := two.normalize(); !errors.Is(err, transport.ErrBadArgument) {
		t.Errorf("%s=lots: %v", envCMA, err)
	}
}

// A Recv whose buffer differs from the message offered by address fails
// with ErrSizeMismatch, reads nothing, and the pair goes on.
func TestSingleCopySizeMismatch(t *testing.T) {
	ts := build(t, 2, singleCopy)
	defer closeAll(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tag := transport.Tag{Group: 3}
	n := 1 << 20
	sent := make(chan error, 1)
	go func() { sent <- ts[0].Send(ctx, 1, tag, pattern(n, 1)) }()
	buf := make([]byte, n+1)
	if err := ts[1].Recv(ctx, 0, tag, buf); !errors.Is(err, transport.ErrSizeMismatch) {
		t.Fatalf("recv: %v, want ErrSizeMismatch", err)
	}
	if err := <-sent; err != nil && !errors.Is(err, transport.ErrSizeMismatch) {
		t.Fatalf("send: %v", err)
	}
	for i, b := range buf {
		if b != 0 {
			t.Fatalf("byte %d written: %d", i, b)
		}
	}
	exchangeBig(t, ts, transport.Tag{Group: 3, Seq: 1}, n)
}

// published returns how many slots tr published toward dst.
func published(tr *endpoint, dst int) uint64 {
	l := tr.links[dst]
	if !l.enter() {
		return 0
	}
	defer l.leave()
	return l.out.head.Load()
}

// arrived waits until tr published more than before slots toward dst
// and dst consumed them all: dst's Endpoint holds what they carried.
func arrived(t *testing.T, tr *endpoint, dst int, before uint64) {
	t.Helper()
	l := tr.links[dst]
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if !l.enter() {
			t.Fatal("link down")
		}
		h, tail := l.out.head.Load(), l.out.tail.Load()
		l.leave()
		if h > before && tail == h {
			return
		}
	}
	t.Fatal("the announce was not consumed")
}

// An abort, on either side, ends a large Send waiting for its receiver
// with the abort; the pair goes on with other collectives.
func TestSingleCopyAbortWhileWaiting(t *testing.T) {
	ts := build(t, 2, singleCopy)
	defer closeAll(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, by := range []int{0, 1} {
		tag := transport.Tag{Group: 4, Seq: uint64(i)}
		sent := make(chan error, 1)
		before := published(ts[0], 1)
		go func() { sent <- ts[0].Send(ctx, 1, tag, pattern(1<<20, 1)) }()
		arrived(t, ts[0], 1, before)
		ts[by].Abort(tag, errors.New("test abort"))
		var a *transport.AbortError
		if err := <-sent; !errors.As(err, &a) {
			t.Fatalf("abort by rank %d: send: %v, want an abort", by, err)
		}
		if err := ts[1].Recv(ctx, 0, tag, make([]byte, 1<<20)); !errors.As(err, &a) {
			t.Fatalf("abort by rank %d: recv: %v, want an abort", by, err)
		}
	}
	// A Send whose context ends while it waits returns that error.
	tag := transport.Tag{Group: 4, Seq: 9}
	cctx, ccancel := context.WithCancel(ctx)
	sent := make(chan error, 1)
	before := published(ts[0], 1)
	go func() { sent <- ts[0].Send(cctx, 1, tag, pattern(1<<20, 1)) }()
	arrived(t, ts[0], 1, before)
	ccancel()
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled send: %v", err)
	}
	exchangeBig(t, ts, transport.Tag{Group: 4, Seq: 10}, 1<<20)
}

// A message offered at an address the sender does not map fails its Recv
// with ErrPeerLost (the peer broke the protocol or died), and never
// panics nor writes past the Recv's buffer.
func TestSingleCopyBadOffer(t *testing.T) {
	ts := build(t, 2, singleCopy)
	defer closeAll(ts)
	p := ts[1].links[0]
	if p.cmaPID == 0 {
		t.Skip("no single copy here")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tag := transport.Tag{Group: 5}
	n := 1 << 20
	into := make([]byte, n+64)
	got := make(chan error, 1)
	go func() { got <- ts[1].Recv(ctx, 0, tag, into[:n]) }()
	// A forged RTS, as if rank 0 had published it: the page at 4096 is
	// never mapped.
	s := make([]byte, slotHdr)
	(&slotHeader{kind: slotRTSCMA, tag: tag, id: 1 << 40, size: uint64(n), off: 4096}).put(s)
	if !p.enter() {
		t.Fatal("link down")
	}
	p.cons.Lock()
	err := p.slot(s)
	p.cons.Unlock()
	p.leave()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("recv: %v, want ErrPeerLost", err)
	}
	for i, b := range into[n:] {
		if b != 0 {
			t.Fatalf("byte %d past the buffer written", n+i)
		}
	}
	// Malformed offers are protocol errors.
	for _, h := range []slotHeader{
		{kind: slotRTSCMA, tag: tag, id: 1<<40 + 1, size: 0, off: 4096},
		{kind: slotRTSCMA, tag: tag, id: 1<<40 + 2, size: 8, off: 0},
		{kind: slotRTSCMA, tag: tag, id: 1<<40 + 3, size: 1 << 62, off: 1 << 63},
		{kind: slotRTSCMA, len: 8, tag: tag, id: 1<<40 + 4, size: 8, off: 4096},
	} {
		s := make([]byte, slotHdr+64)
		h.put(s)
		if err := p.slot(s); err == nil {
			t.Errorf("offer %+v accepted", h)
		}
	}
}

// The conformance suite with every rendezvous message read from the
// sender's memory (small slots and window: most messages are rendezvous).
func TestConformanceSingleCopy(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
		return transporttest.Transports(build(t, n, func(c *Config) {
			c.CMAMin = 1
			c.SlotSize = 4096
			c.Slots = 2
			c.MaxBuffered = 16 << 10
			c.EagerMax = 4096
		}))
	})
}
