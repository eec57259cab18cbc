package shm

// Fuzz targets of what a peer can hand this rank: socket frames and the
// slots of its lane (package mesh fuzzes the handshake). Run each with,
// for example:
//
//	go test -run='^$' -fuzz='^FuzzSlots$' -fuzztime=10s ./collectives/transport/shm

import (
	"bytes"
	"context"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/mesh"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// FuzzFrame: any bytes parse to a frame or an error, and what parses
// encodes back to the same bytes.
func FuzzFrame(f *testing.F) {
	for _, fr := range []frame{{kind: fData}, {kind: fSpace}, {kind: fCTS, flags: 1, id: 7}, {kind: fRetract, id: 3},
		{kind: fAbort, group: 9, seq: 4, id: 1700000000000000000, code: 64, text: []byte("cause")}, {kind: fPing}} {
		f.Add(fr.bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := parseFrame(b)
		if err == nil && !bytes.Equal(fr.bytes(), b) {
			t.Fatalf("%x parses to %+v, which encodes to %x", b, fr, fr.bytes())
		}
	})
}

// FuzzSlots feeds a link arbitrary slots (a header of any fields, then
// payload), after Recvs of a few sizes are posted on its Endpoint: each
// slot is processed or refused as a protocol error, never a panic, and
// the control entries it makes stay in their ring.
func FuzzSlots(f *testing.F) {
	slotOf := func(h slotHeader, payload []byte) []byte {
		b := make([]byte, slotHdr)
		h.put(b)
		return append(b[:56], payload...)
	}
	tag := transport.Tag{Group: 1, Seq: 2, Step: 3}
	eager := slotOf(slotHeader{kind: slotEager, len: 4, tag: tag, size: 4}, []byte{1, 2, 3, 4})
	rts := slotOf(slotHeader{kind: slotRTS, tag: tag, id: 1, size: 6000}, nil)
	chunk0 := slotOf(slotHeader{kind: slotChunk, len: 4096, id: 1}, make([]byte, 4096))
	chunk1 := slotOf(slotHeader{kind: slotChunk, len: 1904, id: 1, off: 4096}, make([]byte, 1904))
	f.Add(uint8(3), eager, rts, chunk0, chunk1)
	f.Add(uint8(0), rts, eager, chunk1, chunk0)
	f.Add(uint8(7), slotOf(slotHeader{kind: 9, len: 0xFFFFFFFF}, nil), rts, rts, chunk0)
	f.Fuzz(func(t *testing.T, recvs uint8, s0, s1, s2, s3 []byte) {
		tr, l := fuzzLink(t)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer func() {
			cancel()
			_ = tr.Close()
			wg.Wait()
		}()
		for i := range int(recvs % 8) {
			size := []int{0, 4, 6000, 4096}[i%4]
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = tr.Recv(ctx, 1, tag, make([]byte, size))
			}()
		}
		time.Sleep(time.Millisecond) // most Recvs are posted
		slot := make([]byte, slotHdr+l.in.slotSize)
		for _, s := range [][]byte{s0, s1, s2, s3} {
			clear(slot)
			copy(slot[:56], s)
			if len(s) > 56 {
				copy(slot[slotHdr:], s[56:])
			}
			if !l.enter() {
				return
			}
			l.cons.Lock()
			err := l.slot(slot)
			n := l.out.ctlHead.Load() - l.out.ctlTail.Load()
			l.cons.Unlock()
			l.leave()
			if err != nil {
				return // the peer would be dropped
			}
			if n > ctlEntries {
				t.Fatalf("%d control entries in a ring of %d", n, ctlEntries)
			}
		}
	})
}

// fuzzLink returns rank 0 of a group of two, whose link to rank 1 is over
// a region of its own and one end of a socket pair (the other end closes
// with the test).
func fuzzLink(t *testing.T) (*endpoint, *link) {
	needShm(t)
	cfg, err := Config{SlotSize: 4096, Slots: 2,
		Setup: msg.Setup{Rank: 0, Size: 2, Secret: testSecret, MaxBuffered: 64 << 10}}.normalize()
	if err != nil {
		t.Fatal(err)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET, 0)
	if err != nil {
		t.Skip(err)
	}
	a, b := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	t.Cleanup(func() { _ = b.Close() })
	nc, err := net.FileConn(a)
	_ = a.Close()
	if err != nil {
		t.Fatal(err)
	}
	g := geometry{slotSize: 4096, slots: 2, group: 0, low: 0, high: 1}
	f, mem, err := newRegion(regionSize(g.slotSize, g.slots))
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	writeHeader(mem, g)
	l, err := newLink(&cfg, mesh.Link{Peer: 1, Conn: nc, Hello: hello{Window: 64 << 10}.encode(), Extra: &region{mem, g}})
	if err != nil {
		t.Fatal(err)
	}
	tr := &endpoint{links: []*link{nil, l}}
	tr.Endpoint, err = msg.New(msg.Config{Size: 2, Name: "shm", MaxBuffered: cfg.MaxBuffered,
		PeerTimeout: cfg.PeerTimeout, HeartbeatInterval: cfg.HeartbeatInterval}, []msg.Link{nil, l})
	if err != nil {
		t.Fatal(err)
	}
	return tr, l
}
