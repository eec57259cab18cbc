package mesh

// The fuzz target of the handshake. Run it with, for example:
//
//	go test -run='^$' -fuzz='^FuzzHandshake$' -fuzztime=10s ./collectives/transport/mesh

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWireLayout pins the byte layout documented on hsMsg: one value, every
// field distinct, against its bytes written out by offset.
func TestWireLayout(t *testing.T) {
	m := hsMsg{Version: 0x0102, Kind: 0x03, Status: 0x04, Group: 0x1011121314151617, From: 0x20212223,
		To: 0x30313233, Size: 0x40414243, Conn: 0x5051, Conns: 0x6061, Label: labelOf("lbl"), Hello: []byte{0xee, 0xef}}
	for i := range m.Nonce {
		m.Nonce[i] = byte(0xa0 + i)
	}
	want := hex.EncodeToString([]byte("CHMS")) + "0102" + "03" + "04" + "1011121314151617" + "20212223" +
		"30313233" + "40414243" + "5051" + "6061" + hex.EncodeToString([]byte("lbl\x00\x00\x00\x00\x00")) +
		hex.EncodeToString(m.Nonce[:]) + "0002" + "eeef" + strings.Repeat("00", MaxHello-2)
	if got := hex.EncodeToString(m.encode()); got != want {
		t.Errorf("handshake %+v:\n got %s\nwant %s", m, got, want)
	}
	dec, err := decodeHS(m.encode())
	if err != nil || !bytes.Equal(dec.encode(), m.encode()) || !bytes.Equal(dec.Hello, m.Hello) {
		t.Errorf("round trip: %+v, %v; want %+v", dec, err, m)
	}
}

// FuzzHandshake: the decoder never panics and round-trips what it
// accepts; an acceptor fed arbitrary bytes as a dialer's, and a dialer fed
// them as an acceptor's answers, refuse them (nobody can forge the MAC)
// and return within their deadline.
func FuzzHandshake(f *testing.F) {
	acc, dial := standIn(f, 1, 2, nil), standIn(f, 0, 2, nil)
	hello := dial.ourMsg(hsHello, 1, 0)
	proof := hsMsg{Version: protoVersion, Kind: hsProof}
	f.Add(append(hello.encode(), proof.encode()...))
	f.Add(hello.encode())
	ch := acc.ourMsg(hsChallenge, 0, 0)
	v := hsMsg{Version: protoVersion, Kind: hsVerdict}
	f.Add(append(ch.encode(), v.encode()...))
	f.Add([]byte("CHMS"))
	f.Add(bytes.Repeat([]byte{0}, 2*hsSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := decodeHS(b); err == nil && !bytes.Equal(m.encode(), b) {
			t.Fatalf("round trip: %x -> %x", b, m.encode())
		}
		acc, dial := standIn(t, 1, 2, nil), standIn(t, 0, 2, nil)
		err := feed(b, func(nc net.Conn) error {
			_, err := acc.acceptHandshake(&guest{Conn: nc, ctx: context.Background()})
			return err
		})
		if err == nil {
			t.Fatal("the acceptor accepted forged bytes")
		}
		err = feed(b, func(nc net.Conn) error {
			_, err := dial.dialHandshake(nc, 1, 0)
			return err
		})
		if err == nil {
			t.Fatal("the dialer accepted forged bytes")
		}
	})
}

// feed runs side on one end of a pipe whose other end writes b (then
// hangs up) and discards what side writes; side's reads and writes end
// within 2 s.
func feed(b []byte, side func(net.Conn) error) error {
	near, far := net.Pipe()
	_ = near.SetDeadline(time.Now().Add(2 * time.Second))
	_ = far.SetDeadline(time.Now().Add(2 * time.Second))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = far.Write(b) // returns once side has read it all
		_ = far.Close()
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(io.Discard, far)
	}()
	err := side(near)
	_ = near.Close()
	_ = far.Close()
	wg.Wait()
	return err
}
