package transport_test

// Fuzz targets for the matching of messages by
// (source, destination, tag): any mix of tags (including the
// point-to-point range with bit 63 set), sizes that disagree, and aborts,
// over the in-process transport and over the message layer. Run with:
//
//	go test -run='^$' -fuzz='^FuzzLocalTags$' -fuzztime=30s ./collectives/transport
//	go test -run='^$' -fuzz='^FuzzMessageLayerTags$' -fuzztime=30s ./collectives/transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

type fuzzMsg struct {
	size, recvSize int
}

type fuzzStream struct {
	src, dst int
	tag      transport.Tag
	msgs     []fuzzMsg
}

// fuzzKey names one stream of a fuzz program.
type fuzzKey struct {
	src, dst int
	tag      transport.Tag
}

// fuzzProg is a parsed fuzz program: streams of messages in the order
// they first appear, and the collectives aborted before any traffic
// ((group, seq) -> the rank that aborts).
type fuzzProg struct {
	order   []fuzzKey
	streams map[fuzzKey]*fuzzStream
	aborted map[[2]uint64]int
}

// parseFuzz reads prog, 6 bytes a record: kind/rank, group, seq, step,
// size, receive size.
func parseFuzz(prog []byte) fuzzProg {
	p := fuzzProg{streams: map[fuzzKey]*fuzzStream{}, aborted: map[[2]uint64]int{}}
	seqOf := func(b byte) uint64 {
		if b >= 200 {
			return transport.P2PTag(0, int(b), 1, 1).Seq // a point-to-point tag's range
		}
		return uint64(b % 4)
	}
	for i := 0; i+6 <= len(prog) && len(p.order) < 24; i += 6 {
		r := prog[i : i+6]
		tag := transport.Tag{Group: uint64(r[1] % 3), Seq: seqOf(r[2]), Step: uint32(r[3] % 8)}
		if r[0]%4 >= 2 { // rank r[0]%2 aborts (group, seq) before any traffic
			k := [2]uint64{tag.Group, tag.Seq}
			if _, ok := p.aborted[k]; !ok {
				p.aborted[k] = int(r[0] % 2)
			}
			continue
		}
		src := int(r[0] % 2)
		k := fuzzKey{src, 1 - src, tag}
		s := p.streams[k]
		if s == nil {
			s = &fuzzStream{src: src, dst: 1 - src, tag: tag}
			p.streams[k] = s
			p.order = append(p.order, k)
		}
		m := fuzzMsg{size: int(r[4] % 64), recvSize: int(r[4] % 64)}
		if r[5]%16 == 1 {
			m.recvSize = int(r[5]/16) % 64 // most often a different size
		}
		s.msgs = append(s.msgs, m)
	}
	return p
}

// payload is message i of stream s, n bytes.
func (s *fuzzStream) payload(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(int(s.tag.Group)*31 + int(s.tag.Seq)*7 + int(s.tag.Step)*3 + s.src*101 + i*13 + j)
	}
	return b
}

// fuzzFails collects failures from the streams' goroutines.
type fuzzFails struct {
	mu    sync.Mutex
	fails []string
}

func (f *fuzzFails) add(format string, args ...any) {
	f.mu.Lock()
	f.fails = append(f.fails, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// send runs stream s's Sends on ts and checks each result.
func (s *fuzzStream) send(ctx context.Context, ts []transport.Transport, aborted bool, f *fuzzFails) {
	for i, m := range s.msgs {
		err := ts[s.src].Send(ctx, s.dst, s.tag, s.payload(i, m.size))
		var ae *transport.AbortError
		switch {
		case aborted:
			if !errors.Is(err, transport.ErrAborted) || !errors.As(err, &ae) || ae.Group != s.tag.Group || ae.Seq != s.tag.Seq {
				f.add("send %d of %d->%d %v (aborted): %v, want ErrAborted", i, s.src, s.dst, s.tag, err)
			}
		case m.size != m.recvSize:
			if err != nil && !errors.Is(err, transport.ErrSizeMismatch) {
				f.add("send %d of %d->%d %v (size %d, recv %d): %v", i, s.src, s.dst, s.tag, m.size, m.recvSize, err)
			}
		case err != nil:
			f.add("send %d of %d->%d %v: %v", i, s.src, s.dst, s.tag, err)
		}
	}
}

// recv runs stream s's Recvs on ts and checks each result and its bytes.
func (s *fuzzStream) recv(ctx context.Context, ts []transport.Transport, aborted bool, f *fuzzFails) {
	for i, m := range s.msgs {
		into := make([]byte, m.recvSize)
		err := ts[s.dst].Recv(ctx, s.src, s.tag, into)
		switch {
		case aborted:
			if !errors.Is(err, transport.ErrAborted) {
				f.add("recv %d of %d->%d %v (aborted): %v, want ErrAborted", i, s.src, s.dst, s.tag, err)
			}
		case m.size != m.recvSize:
			if !errors.Is(err, transport.ErrSizeMismatch) {
				f.add("recv %d of %d->%d %v (size %d into %d): %v, want ErrSizeMismatch", i, s.src, s.dst, s.tag, m.size, m.recvSize, err)
			}
		case err != nil:
			f.add("recv %d of %d->%d %v: %v", i, s.src, s.dst, s.tag, err)
		default:
			if want := s.payload(i, m.size); string(into) != string(want) {
				f.add("recv %d of %d->%d %v: got %x, want %x (message order or tags mixed up)", i, s.src, s.dst, s.tag, into, want)
			}
		}
	}
}

// run plays p on the two ranks ts (the aborts first, each awaited on the
// other rank), all streams at once, then closes rank
// 0 and checks that its calls fail with ErrClosed and the peer's with
// ErrPeerLost.
func (p fuzzProg) run(t *testing.T, ts []transport.Transport) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for k, origin := range p.aborted {
		ts[origin].Abort(transport.Tag{Group: k[0], Seq: k[1]}, errors.New("fuzz abort"))
		// The other rank learns of it within bounded time (a Recv of the
		// collective fails then); only from then on must its Sends fail.
		probe := transport.Tag{Group: k[0], Seq: k[1], Step: 1 << 20}
		if err := ts[1-origin].Recv(ctx, origin, probe, nil); !errors.Is(err, transport.ErrAborted) {
			t.Fatalf("rank %d never learned of the abort of (%d, %d): %v", 1-origin, k[0], k[1], err)
		}
	}
	var wg sync.WaitGroup
	var f fuzzFails
	for _, k := range p.order {
		s := p.streams[k]
		_, aborted := p.aborted[[2]uint64{s.tag.Group, s.tag.Seq}]
		wg.Go(func() { s.send(ctx, ts, aborted, &f) })
		wg.Go(func() { s.recv(ctx, ts, aborted, &f) })
	}
	wg.Wait()
	for _, msg := range f.fails {
		t.Error(msg)
	}
	_ = ts[0].Close()
	if err := ts[0].Send(ctx, 1, transport.Tag{Group: 9}, nil); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("send after close: %v, want ErrClosed", err)
	}
	if err := ts[1].Recv(ctx, 0, transport.Tag{Group: 9}, nil); !errors.Is(err, transport.ErrPeerLost) {
		t.Errorf("recv from a closed peer: %v, want ErrPeerLost", err)
	}
}

// fuzzSeeds are programs the fuzz targets start from.
var fuzzSeeds = [][]byte{
	{0, 0, 0, 0, 4, 4, 0, 0, 0, 0, 4, 4},                   // two messages on one tag
	{0, 0, 0, 0, 4, 4, 1, 0, 0, 0, 4, 4},                   // both directions
	{0, 1, 2, 3, 8, 9, 0, 1, 2, 3, 8, 8},                   // a size mismatch, then a good one
	{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0},                   // empty messages
	{2, 1, 1, 0, 0, 0, 0, 1, 1, 0, 5, 5, 0, 1, 1, 7, 5, 5}, // abort (1, 1): all its steps fail
	{0, 2, 200, 0, 3, 3, 0, 2, 201, 0, 3, 3},               // point-to-point sequence numbers
	{3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},                   // abort by rank 1
}

// closeAll closes ts.
func closeAll(ts []transport.Transport) {
	for _, tr := range ts {
		_ = tr.Close()
	}
}

// FuzzLocalTags: every message of a (source, destination, tag) stream
// reaches the Recv of the same position in that stream with its bytes
// (FIFO per tag, independent across tags: all streams run at once and
// none may wait behind another); a size disagreement fails the Recv with
// ErrSizeMismatch and consumes the message; an aborted (group, seq) fails
// every Send and Recv of its tags on both ranks with ErrAborted; nothing
// blocks past its context.
func FuzzLocalTags(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		ts := transport.NewLocal(2)
		defer closeAll(ts)
		parseFuzz(prog).run(t, ts)
	})
}

// FuzzMessageLayerTags: the same programs over the message layer (two
// endpoints joined by in-memory pipe links with small limits, so that
// messages go eagerly, by rendezvous, and in several chunks).
func FuzzMessageLayerTags(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		eps, _, err := transporttest.PipeEndpoints(2, transporttest.PipeConfig{EagerMax: 16, Chunk: 8, Window: 256}, msg.Config{})
		if err != nil {
			t.Fatal(err)
		}
		ts := []transport.Transport{eps[0], eps[1]}
		defer closeAll(ts)
		parseFuzz(prog).run(t, ts)
	})
}
