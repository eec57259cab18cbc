package shm

// Fuzz targets of what a peer can hand this rank: handshake messages,
// socket frames and the slots of its lane. Run each with, for example:
//
//	go test -run='^$' -fuzz='^FuzzSlots$' -fuzztime=10s ./collectives/transport/shm

import (
	"bytes"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// FuzzHandshake: any bytes decode to a message or an error, and what
// decodes encodes back to the same bytes.
func FuzzHandshake(f *testing.F) {
	f.Add((&hsMsg{Version: protoVersion, Kind: hsHello, Group: 77, From: 1, Size: 2, Window: 1 << 20,
		SlotSize: 4096, Slots: 2, Nonce: nonce()}).encode())
	f.Add((&hsMsg{Version: protoVersion, Kind: hsVerdict, Status: stMAC}).encode())
	f.Add([]byte("CHSM"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for kind := uint8(hsHello); kind <= hsReady; kind++ {
			m, err := decodeHS(b, kind)
			if err == nil && !bytes.Equal(m.encode(), b) {
				t.Fatalf("%x decodes to %+v, which encodes to %x", b, m, m.encode())
			}
		}
	})
}

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

// FuzzSlots feeds a peer's pump handlers arbitrary slots (a header of any
// fields, then payload), after Recvs of a few sizes are posted: each slot
// is processed or refused as a protocol error, never a panic, and the
// control entries it makes stay in their ring.
func FuzzSlots(f *testing.F) {
	slotOf := func(h slotHeader, payload []byte) []byte {
		b := make([]byte, slotHdr)
		h.put(b)
		return append(b[:56], payload...)
	}
	tag := transport.Tag{Group: 1, Seq: 2, Step: 3}
	eager := slotOf(slotHeader{kind: slotEager, len: 4, tag: tag, size: 4}, []byte{1, 2, 3, 4})
	rts := slotOf(slotHeader{kind: slotRTS, tag: tag, id: 1, size: 6000}, nil)
	chunk0 := slotOf(slotHeader{kind: slotChunk, len: 4096, id: 1, size: 6000}, make([]byte, 4096))
	chunk1 := slotOf(slotHeader{kind: slotChunk, len: 1904, id: 1, size: 6000, off: 4096}, make([]byte, 1904))
	f.Add(uint8(3), eager, rts, chunk0, chunk1)
	f.Add(uint8(0), rts, eager, chunk1, chunk0)
	f.Add(uint8(7), slotOf(slotHeader{kind: 9, len: 0xFFFFFFFF}, nil), rts, rts, chunk0)
	f.Fuzz(func(t *testing.T, recvs uint8, s0, s1, s2, s3 []byte) {
		p, cleanup := fuzzPeer(t)
		defer cleanup()
		p.mu.Lock()
		for i := range int(recvs % 8) {
			size := []int{0, 4, 6000, 4096}[i%4]
			q := p.queue(tag)
			q.posted = append(q.posted, &op{buf: make([]byte, size), tag: tag, done: make(chan error, 1)})
		}
		p.mu.Unlock()
		slot := make([]byte, slotHdr+p.in.slotSize)
		for _, s := range [][]byte{s0, s1, s2, s3} {
			clear(slot)
			copy(slot[:56], s)
			if len(s) > 56 {
				copy(slot[slotHdr:], s[56:])
			}
			if err := p.slot(slot); err != nil {
				return // the peer would be dropped
			}
			if n := p.out.ctlHead.Load() - p.out.ctlTail.Load(); n > ctlEntries {
				t.Fatalf("%d control entries in a ring of %d", n, ctlEntries)
			}
		}
	})
}

// fuzzPeer returns rank 0's peer 1 of a group of two over a region in
// ordinary memory and one end of a socket pair.
func fuzzPeer(t *testing.T) (*peer, func()) {
	cfg, err := Config{Rank: 0, Size: 2, Secret: testSecret, SlotSize: 4096, Slots: 2, MaxBuffered: 64 << 10}.normalize()
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(cfg)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET, 0)
	if err != nil {
		t.Skip(err)
	}
	a, b := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	nc, err := net.FileConn(a)
	_ = a.Close()
	if err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	s, err := newSock(tr, nc.(*net.UnixConn))
	if err != nil {
		t.Fatal(err)
	}
	g := geometry{slotSize: 4096, slots: 2, group: 0, low: 0, high: 1}
	mem := make([]byte, regionSize(g.slotSize, g.slots))
	writeHeader(mem, g)
	p := tr.peers[1]
	p.attach(s, mem, g, 64<<10)
	return p, func() {
		s.shut()
		_ = b.Close()
	}
}
