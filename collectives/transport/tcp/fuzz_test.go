package tcp

// Fuzz targets of the wire decoders. Run each with, for example:
//
//	go test -run='^$' -fuzz='^FuzzFrame$' -fuzztime=10s ./collectives/transport/tcp

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/mesh"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

func frameSeeds() [][]byte {
	var out [][]byte
	for _, f := range []frame{
		{Type: fEager, Len: 4, Group: 1, Seq: 2, Step: 3},
		{Type: fRTS, Group: 1, Seq: 2, Step: 3, ID: 1, Size: 1 << 20},
		{Type: fCTS, ID: 1},
		{Type: fCTS, Flags: uint8(msg.SizeMismatch), ID: 1},
		{Type: fChunk, Len: 4096, ID: 1, Size: 8192},
		{Type: fRetract, ID: 7},
		{Type: fCredit, Size: 4160},
		{Type: fAbort, Len: 5, Group: 9, Seq: 4, Origin: 1, ID: 1700000000000000000, Size: 64},
		{Type: fPing},
		{Type: fEager, Len: 0xFFFFFFFF},
	} {
		out = append(out, f.bytes())
	}
	return out
}

// TestWireLayout pins the byte layout documented on frame: one value,
// every field distinct, against its bytes written out by offset. The fuzz targets check that decoding and encoding agree; this
// checks that both agree with the documented wire format.
func TestWireLayout(t *testing.T) {
	fr := frame{Type: 0x01, Flags: 0x02, Len: 0x03040506, Group: 0x1011121314151617, Seq: 0x2021222324252627,
		Step: 0x30313233, Origin: 0x40414243, ID: 0x5051525354555657, Size: 0x6061626364656667}
	wantFrame := "01" + "02" + "0000" + "03040506" + "1011121314151617" + "2021222324252627" +
		"30313233" + "40414243" + "5051525354555657" + "6061626364656667"
	if got := hex.EncodeToString(fr.bytes()); got != wantFrame {
		t.Errorf("frame %+v:\n got %s\nwant %s", fr, got, wantFrame)
	}
	if back := getFrame(fr.bytes()); back != fr {
		t.Errorf("frame round trip: %+v, want %+v", back, fr)
	}
}

// FuzzFrame: the frame header decoder never panics, never allocates, and
// accepts only headers that honour the limit; what it accepts encodes
// back to the same bytes.
func FuzzFrame(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s, uint32(DefaultMaxFrame))
	}
	f.Add([]byte("garbage"), uint32(minFrame))
	f.Fuzz(func(t *testing.T, b []byte, limit uint32) {
		maxFrame := minFrame + int(limit%(2*DefaultMaxFrame))
		var fr frame
		var err error
		if allocs := testing.AllocsPerRun(1, func() { fr, _ = decodeFrame(b, maxFrame) }); allocs != 0 && len(b) >= hdrSize {
			if _, err := decodeFrame(b, maxFrame); err == nil {
				t.Fatalf("decoding a valid header allocated %v times", allocs)
			}
		}
		fr, err = decodeFrame(b, maxFrame)
		if err != nil {
			return
		}
		if int(fr.Len) > maxFrame {
			t.Fatalf("accepted a length %d over %d", fr.Len, maxFrame)
		}
		if fr.Type != fEager && fr.Type != fChunk && fr.Type != fAbort && fr.Len != 0 {
			t.Fatalf("accepted a payload on type %d", fr.Type)
		}
		if out := fr.bytes(); !bytes.Equal(out, b[:hdrSize]) {
			t.Fatalf("round trip: %x -> %+v -> %x", b[:hdrSize], fr, out)
		}
	})
}

// pipeTransport returns rank 0 of a group of 2 whose connection to rank 1
// is a pipe: the caller plays rank 1 on far.
func pipeTransport(t *testing.T) (tr *endpoint, far net.Conn) {
	cfg, err := Config{ConnsPerPeer: 1, MaxFrame: minFrame,
		Setup: msg.Setup{Addrs: []string{"x:1", "x:2"}, Size: 2, Group: 1, Secret: testSecret, MaxBuffered: 64 << 10, EagerMax: 1024}}.normalize()
	if err != nil {
		t.Fatal(err)
	}
	near, far := net.Pipe()
	l := newLink(&cfg, 1, []mesh.Link{{Peer: 1, Conn: near, Hello: ourLimits(cfg)}})
	tr = &endpoint{links: []*link{nil, l}}
	tr.Endpoint, err = msg.New(msg.Config{Size: 2, Name: "tcp", MaxBuffered: cfg.MaxBuffered,
		PeerTimeout: cfg.PeerTimeout, HeartbeatInterval: cfg.HeartbeatInterval}, []msg.Link{nil, l})
	if err != nil {
		t.Fatal(err)
	}
	return tr, far
}

// FuzzInbound: any byte stream from an authenticated peer, while Recvs of
// a few tags and sizes wait, ends in delivered messages, failed Recvs
// (ErrPeerLost for a protocol error, ErrSizeMismatch, timeouts) or
// nothing; never a panic, a hang past the Recvs' deadlines, or memory
// beyond the window and frame limits.
func FuzzInbound(f *testing.F) {
	var s []byte
	s = append(s, (&frame{Type: fEager, Len: 3, Group: 1}).bytes()...)
	s = append(s, 1, 2, 3)
	f.Add(s, uint8(3))
	s = append((&frame{Type: fRTS, Group: 1, ID: 1, Size: 5}).bytes(), (&frame{Type: fChunk, Len: 5, ID: 1}).bytes()...)
	s = append(s, 1, 2, 3, 4, 5)
	f.Add(s, uint8(5))
	f.Add(append((&frame{Type: fAbort, Len: 2, Group: 1, Origin: 1}).bytes(), 'h', 'i'), uint8(0))
	f.Add(append((&frame{Type: fCredit, Size: 100}).bytes(), (&frame{Type: fPing}).bytes()...), uint8(1))
	for _, seed := range frameSeeds() {
		f.Add(seed, uint8(4))
	}
	f.Fuzz(func(t *testing.T, stream []byte, size uint8) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		tr, far := pipeTransport(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var recvs, pipe sync.WaitGroup
		for step := range 3 {
			recvs.Add(1)
			go func() {
				defer recvs.Done()
				_ = tr.Recv(ctx, 1, transport.Tag{Group: 1, Step: uint32(step)}, make([]byte, int(size)+step))
			}()
		}
		pipe.Add(1)
		go func() {
			defer pipe.Done()
			_, _ = io.Copy(io.Discard, far)
		}()
		// A pipe's Write returns once the reader has taken every byte.
		_ = far.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = far.Write(stream)
		cancel()
		done := make(chan struct{})
		go func() {
			recvs.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Recvs did not return")
		}
		_ = tr.Close()
		_ = far.Close()
		pipe.Wait()
		runtime.ReadMemStats(&ms)
		if grew := ms.TotalAlloc - before; grew > 8<<20 {
			t.Fatalf("allocated %d bytes for a %d-byte stream", grew, len(stream))
		}
	})
}
