package transport_test

// Fuzz target for the in-process transport's matching of messages by
// (source, destination, tag): any mix of tags (including the
// point-to-point range with bit 63 set), sizes that disagree, and aborts.
// Run with:
//
//	go test -run='^$' -fuzz='^FuzzLocalTags$' -fuzztime=30s ./collectives/transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

type fuzzMsg struct {
	size, recvSize int
}

type fuzzStream struct {
	src, dst int
	tag      transport.Tag
	msgs     []fuzzMsg
}

// FuzzLocalTags: every message of a (source, destination, tag) stream
// reaches the Recv of the same position in that stream with its bytes
// (FIFO per tag, independent across tags: all streams run at once and
// none may wait behind another); a size disagreement fails the Recv with
// ErrSizeMismatch and consumes the message; an aborted (group, seq) fails
// every Send and Recv of its tags on both ranks with ErrAborted; nothing
// blocks past its context.
func FuzzLocalTags(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 4, 4, 0, 0, 0, 0, 4, 4})                   // two messages on one tag
	f.Add([]byte{0, 0, 0, 0, 4, 4, 1, 0, 0, 0, 4, 4})                   // both directions
	f.Add([]byte{0, 1, 2, 3, 8, 9, 0, 1, 2, 3, 8, 8})                   // a size mismatch, then a good one
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0})                   // empty messages
	f.Add([]byte{2, 1, 1, 0, 0, 0, 0, 1, 1, 0, 5, 5, 0, 1, 1, 7, 5, 5}) // abort (1, 1): all its steps fail
	f.Add([]byte{0, 2, 200, 0, 3, 3, 0, 2, 201, 0, 3, 3})               // point-to-point sequence numbers
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1})                   // abort by rank 1
	f.Fuzz(func(t *testing.T, prog []byte) {
		type key struct {
			src, dst int
			tag      transport.Tag
		}
		var order []key
		streams := map[key]*fuzzStream{}
		aborted := map[[2]uint64]int{} // (group, seq) -> origin
		seqOf := func(b byte) uint64 {
			if b >= 200 {
				return transport.P2PTag(0, int(b), 1, 1).Seq // a point-to-point tag's range
			}
			return uint64(b % 4)
		}
		for i := 0; i+6 <= len(prog) && len(order) < 24; i += 6 {
			r := prog[i : i+6]
			tag := transport.Tag{Group: uint64(r[1] % 3), Seq: seqOf(r[2]), Step: uint32(r[3] % 8)}
			switch r[0] % 4 {
			case 2, 3: // rank r[0]%2 aborts (group, seq) before any traffic
				k := [2]uint64{tag.Group, tag.Seq}
				if _, ok := aborted[k]; !ok {
					aborted[k] = int(r[0] % 2)
				}
				continue
			}
			src := int(r[0] % 2)
			k := key{src, 1 - src, tag}
			s := streams[k]
			if s == nil {
				s = &fuzzStream{src: src, dst: 1 - src, tag: tag}
				streams[k] = s
				order = append(order, k)
			}
			m := fuzzMsg{size: int(r[4] % 64), recvSize: int(r[4] % 64)}
			if r[5]%16 == 1 {
				m.recvSize = int(r[5]/16) % 64 // most often a different size
			}
			s.msgs = append(s.msgs, m)
		}
		ts := transport.NewLocal(2)
		defer func() {
			for _, tr := range ts {
				_ = tr.Close()
			}
		}()
		for k, origin := range aborted {
			ts[origin].Abort(transport.Tag{Group: k[0], Seq: k[1]}, errors.New("fuzz abort"))
		}
		payload := func(s *fuzzStream, i, n int) []byte {
			b := make([]byte, n)
			for j := range b {
				b[j] = byte(int(s.tag.Group)*31 + int(s.tag.Seq)*7 + int(s.tag.Step)*3 + s.src*101 + i*13 + j)
			}
			return b
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var fails []string
		failf := func(format string, args ...any) {
			mu.Lock()
			fails = append(fails, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		for _, k := range order {
			s := streams[k]
			_, isAborted := aborted[[2]uint64{s.tag.Group, s.tag.Seq}]
			wg.Go(func() {
				for i, m := range s.msgs {
					err := ts[s.src].Send(ctx, s.dst, s.tag, payload(s, i, m.size))
					switch {
					case isAborted:
						var ae *transport.AbortError
						if !errors.Is(err, transport.ErrAborted) || !errors.As(err, &ae) || ae.Group != s.tag.Group || ae.Seq != s.tag.Seq {
							failf("send %d of %d->%d %v (aborted): %v, want ErrAborted", i, s.src, s.dst, s.tag, err)
						}
					case m.size != m.recvSize:
						if err != nil && !errors.Is(err, transport.ErrSizeMismatch) {
							failf("send %d of %d->%d %v (size %d, recv %d): %v", i, s.src, s.dst, s.tag, m.size, m.recvSize, err)
						}
					case err != nil:
						failf("send %d of %d->%d %v: %v", i, s.src, s.dst, s.tag, err)
					}
				}
			})
			wg.Go(func() {
				for i, m := range s.msgs {
					into := make([]byte, m.recvSize)
					err := ts[s.dst].Recv(ctx, s.src, s.tag, into)
					switch {
					case isAborted:
						if !errors.Is(err, transport.ErrAborted) {
							failf("recv %d of %d->%d %v (aborted): %v, want ErrAborted", i, s.src, s.dst, s.tag, err)
						}
					case m.size != m.recvSize:
						if !errors.Is(err, transport.ErrSizeMismatch) {
							failf("recv %d of %d->%d %v (size %d into %d): %v, want ErrSizeMismatch", i, s.src, s.dst, s.tag, m.size, m.recvSize, err)
						}
					case err != nil:
						failf("recv %d of %d->%d %v: %v", i, s.src, s.dst, s.tag, err)
					default:
						if want := payload(s, i, m.size); string(into) != string(want) {
							failf("recv %d of %d->%d %v: got %x, want %x (message order or tags mixed up)", i, s.src, s.dst, s.tag, into, want)
						}
					}
				}
			})
		}
		wg.Wait()
		for _, msg := range fails {
			t.Error(msg)
		}
		// Closed: this rank's calls fail with ErrClosed, the peer's with ErrPeerLost.
		_ = ts[0].Close()
		if err := ts[0].Send(ctx, 1, transport.Tag{Group: 9}, nil); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("send after close: %v, want ErrClosed", err)
		}
		if err := ts[1].Recv(ctx, 0, transport.Tag{Group: 9}, nil); !errors.Is(err, transport.ErrPeerLost) {
			t.Errorf("recv from a closed peer: %v, want ErrPeerLost", err)
		}
	})
}
