// Package transporttest is the conformance suite for transport.Transport
// implementations, in the style of hashicorp/raft's transport tests: every
// implementation runs the same checks through Run, and every msg.Link
// through RunLink. It also holds what transport packages' tests share
// (the polling check Polling, ConnectGroup, the eviction scenario run by
// a rank's process of its own: StartChild, EvictProcesses) and
// an in-memory pipe link, registered as a carrier by RegisterPipeCarrier.
package transporttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"go.uber.org/goleak"
)

// Bounds used by the suite. Prompt is how soon a failure (abort, close) must
// reach a blocked peer; Short is the deadline of operations expected to time
// out; Long bounds operations expected to succeed.
const (
	Prompt = 2 * time.Second
	Short  = 50 * time.Millisecond
	Long   = 10 * time.Second
)

// MakeFunc returns the n endpoints (indexed by rank) of a fresh group. The
// suite closes them.
type MakeFunc func(t *testing.T, n int) []transport.Transport

// Run runs the conformance suite against the transports make returns.
func Run(t *testing.T, make MakeFunc) {
	cases := []struct {
		name string
		fn   func(*testing.T, MakeFunc)
	}{
		{"RankSize", testRankSize},
		{"SendRecvAllPairs", testAllPairs},
		{"ZeroLength", testZeroLength},
		{"Large", testLarge},
		{"TagMatching", testTagMatching},
		{"FIFOSameTag", testFIFO},
		{"SizeMismatch", testSizeMismatch},
		{"BadPeer", testBadPeer},
		{"Timeout", testTimeout},
		{"Canceled", testCanceled},
		{"AbortPropagates", testAbort},
		{"AbortOnlyThatCollective", testAbortScope},
		{"CloseFailsPeers", testClose},
		{"ConcurrentTags", testConcurrent},
		{"Retire", testRetire},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			c.fn(t, make)
		})
	}
}

// group makes n endpoints and closes them when the test ends.
func group(t *testing.T, mk MakeFunc, n int) []transport.Transport {
	t.Helper()
	ts := mk(t, n)
	if len(ts) != n {
		t.Fatalf("make returned %d transports, want %d", len(ts), n)
	}
	t.Cleanup(func() {
		for _, tr := range ts {
			_ = tr.Close()
		}
	})
	return ts
}

func ctxLong(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Long)
	t.Cleanup(cancel)
	return ctx
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func Async(fn func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}

// Await returns the error from ch, failing the test after d.
func Await(t *testing.T, ch <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("%s: no result within %v", what, d)
		return nil
	}
}

func testRankSize(t *testing.T, mk MakeFunc) {
	ts := group(t, mk, 3)
	for i, tr := range ts {
		if tr.Rank() != i || tr.Size() != 3 {
			t.Fatalf("endpoint %d: Rank %d Size %d", i, tr.Rank(), tr.Size())
		}
	}
}

// Every rank sends every other one a message at once.
func testAllPairs(t *testing.T, mk MakeFunc) {
	allPairs(t, group(t, mk, 4), 1, func(s, d, _ int) (transport.Tag, int) {
		return transport.Tag{Group: 1, Seq: uint64(s*4 + d), Step: 3}, 100 + s*10 + d
	})
}

// allPairs has every rank of ts send every other one k messages at once,
// the i-th under tag(s, d, i) of the size it gives, and checks them.
func allPairs(t *testing.T, ts []transport.Transport, k int, tag func(s, d, i int) (transport.Tag, int)) {
	ctx := ctxLong(t)
	var wg sync.WaitGroup
	n := len(ts)
	errs := make(chan error, 2*n*n*k)
	for s := range n {
		for d := range n {
			for i := range k {
				if s == d {
					continue
				}
				tag, size := tag(s, d, i)
				want := pattern(size, byte(s*16+d+i))
				wg.Go(func() { errs <- ts[s].Send(ctx, d, tag, want) })
				wg.Go(func() {
					got := make([]byte, len(want))
					err := ts[d].Recv(ctx, s, tag, got)
					if err == nil && !bytes.Equal(got, want) {
						err = fmt.Errorf("%d->%d %v: wrong bytes", s, d, tag)
					}
					errs <- err
				})
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// exchange has rank s send data to rank d under tag and checks that it
// arrives whole.
func exchange(ctx context.Context, t *testing.T, ts []transport.Transport, s, d int, tag transport.Tag, data []byte) {
	t.Helper()
	ch := Async(func() error { return ts[s].Send(ctx, d, tag, data) })
	got := make([]byte, len(data))
	if err := ts[d].Recv(ctx, s, tag, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%d->%d %v: %v, or the bytes differ", s, d, tag, err)
	}
	if err := Await(t, ch, Long, "send"); err != nil {
		t.Fatal(err)
	}
}

func testZeroLength(t *testing.T, mk MakeFunc) {
	exchange(ctxLong(t), t, group(t, mk, 2), 0, 1, transport.Tag{Group: 2}, nil)
}

func testLarge(t *testing.T, mk MakeFunc) {
	exchange(ctxLong(t), t, group(t, mk, 2), 1, 0, transport.Tag{Group: 3, Seq: 1}, pattern(4<<20+3, 9))
}

// Receiving tags in the opposite order of sending works: different tags
// never block each other.
func testTagMatching(t *testing.T, mk MakeFunc) {
	ts := group(t, mk, 2)
	ctx := ctxLong(t)
	tags := []transport.Tag{{Group: 1, Seq: 1, Step: 0}, {Group: 1, Seq: 1, Step: 1}, {Group: 1, Seq: 2}, {Group: 2, Seq: 1}}
	var sends []<-chan error
	for i, tag := range tags {
		data := pattern(64, byte(i))
		sends = append(sends, Async(func() error { return ts[0].Send(ctx, 1, tag, data) }))
	}
	for i := len(tags) - 1; i >= 0; i-- {
		got := make([]byte, 64)
		if err := ts[1].Recv(ctx, 0, tags[i], got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, pattern(64, byte(i))) {
			t.Fatalf("tag %v matched the wrong message", tags[i])
		}
	}
	for _, ch := range sends {
		if err := Await(t, ch, Long, "send"); err != nil {
			t.Fatal(err)
		}
	}
}

// Messages with one tag between one pair arrive in send order.
func testFIFO(t *testing.T, mk MakeFunc) {
	ts := group(t, mk, 2)
	ctx := ctxLong(t)
	tag := transport.Tag{Group: 5, Seq: 5, Step: 5}
	const k = 20
	ch := Async(func() error {
		for i := 0; i < k; i++ {
			if err := ts[0].Send(ctx, 1, tag, []byte{byte(i)}); err != nil {
				return err
			}
		}
		return nil
	})
	for i := 0; i < k; i++ {
		got := []byte{0xFF}
		if err := ts[1].Recv(ctx, 0, tag, got); err != nil {
			t.Fatal(err)
		}
		if got[0] != byte(i) {
			t.Fatalf("message %d arrived as %d", i, got[0])
		}
	}
	if err := Await(t, ch, Long, "sends"); err != nil {
		t.Fatal(err)
	}
}

func testSizeMismatch(t *testing.T, mk MakeFunc) {
	ts := group(t, mk, 2)
	ctx := ctxLong(t)
	tag := transport.Tag{Group: 6}
	ch := Async(func() error { return ts[0].Send(ctx, 1, tag, make([]byte, 10)) })
	err := ts[1].Recv(ctx, 0, tag, make([]byte, 12))
	if !errors.Is(err, transport.ErrSizeMismatch) {
		t.Fatalf("recv: got %v, want ErrSizeMismatch", err)
	}
	if err := Await(t, ch, Long, "send"); err != nil && !errors.Is(err, transport.ErrSizeMismatch) {
		t.Fatalf("send: got %v, want nil or ErrSizeMismatch", err)
	}
	exchange(ctx, t, ts, 0, 1, tag, []byte{1, 2}) // the pair still works
}

func testBadPeer(t *testing.T, mk MakeFunc) {
	ts := group(t, mk, 3)
	ctx := ctxLong(t)
	for _, p := range []int{-1, 1, 3, 100} {
		if err := ts[1].Send(ctx, p, transport.Tag{}, []byte{1}); !errors.Is(err, transport.ErrBadPeer) {
			t.Errorf("send to %d: got %v, want ErrBadPeer", p, err)
		}
		if err := ts[1].Recv(ctx, p, transport.Tag{}, []byte{1}); !errors.Is(err, transport.ErrBadPeer) {
			t.Errorf("recv from %d: got %v, want ErrBadPeer", p, err)
		}
	}
}

func testTimeout(t *testing.T, mk MakeFunc) {
	ts := group(t, mk, 2)
	ctx, cancel := context.WithTimeout(context.Background(), Short)
	defer cancel()
	start := time.Now()
	err := ts[0].Recv(ctx, 1, transport.Tag{Group: 7}, make([]byte, 4))
	if !errors.Is(err, transport.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("recv: got %v, want ErrTimeout and DeadlineExceeded", err)
	}
	if el := time.Since(start); el > Prompt {
		t.Fatalf("recv timed out after %v", el)
	}
	// An unmatched Send either buffers (nil) or times out.
	ctx2, cancel2 := context.WithTimeout(context.Background(), Short)
	defer cancel2()
	if err := ts[0].Send(ctx2, 1, transport.Tag{Group: 7, Seq: 1}, []byte{1}); err != nil &&
		(!errors.Is(err, transport.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded)) {
		t.Fatalf("send: got %v, want nil or ErrTimeout", err)
	}
	// An expired context fails at once.
	if err := ts[0].Recv(ctx, 1, transport.Tag{Group: 7, Seq: 2}, nil); !errors.Is(err, transport.ErrTimeout) {
		t.Fatalf("recv with expired ctx: %v", err)
	}
}

func testCanceled(t *testing.T, mk MakeFunc) {
	ts := group(t, mk, 2)
	ctx, cancel := context.WithCancel(context.Background())
	ch := Async(func() error { return ts[1].Recv(ctx, 0, transport.Tag{Group: 8}, make([]byte, 4)) })
	time.Sleep(5 * time.Millisecond)
	cancel()
	if err := Await(t, ch, Prompt, "canceled recv"); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

var errCause = errors.New("cause-for-test")

// An Abort by one rank fails the blocked operations of that collective on
// every rank, quickly, naming the origin and the cause; later operations of
// the collective fail at once.
func testAbort(t *testing.T, mk MakeFunc) {
	const n = 4
	ts := group(t, mk, n)
	ctx := ctxLong(t)
	var chs []<-chan error
	for r := 1; r < n; r++ {
		src := (r + 1) % n
		if src == 0 {
			src = 1
		}
		tag := transport.Tag{Group: 9, Seq: 4, Step: uint32(r)}
		chs = append(chs, Async(func() error { return ts[r].Recv(ctx, src, tag, make([]byte, 8)) }))
	}
	// A send that nobody receives (it may buffer: then it returns nil).
	sendCh := Async(func() error {
		return ts[2].Send(ctx, 3, transport.Tag{Group: 9, Seq: 4, Step: 99}, make([]byte, 1<<20))
	})
	time.Sleep(10 * time.Millisecond)
	start := time.Now()
	ts[0].Abort(transport.Tag{Group: 9, Seq: 4, Step: 1234}, errCause)
	for i, ch := range chs {
		err := Await(t, ch, Prompt, "aborted recv")
		checkAbort(t, err, fmt.Sprintf("rank %d recv", i+1))
	}
	if err := Await(t, sendCh, Prompt, "aborted send"); err != nil {
		checkAbort(t, err, "rank 2 send")
	}
	if el := time.Since(start); el > Prompt {
		t.Fatalf("abort took %v", el)
	}
	// Future operations of that collective fail at once, on every rank.
	for r := 0; r < n; r++ {
		peer := (r + 1) % n
		var err error
		ok := false
		deadline := time.Now().Add(Prompt)
		for !ok && time.Now().Before(deadline) {
			c, cancel := context.WithTimeout(context.Background(), Short)
			err = ts[r].Recv(c, peer, transport.Tag{Group: 9, Seq: 4, Step: 7}, make([]byte, 1))
			cancel()
			ok = errors.Is(err, transport.ErrAborted)
		}
		checkAbort(t, err, fmt.Sprintf("rank %d later recv", r))
	}
}

func checkAbort(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, transport.ErrAborted) {
		t.Fatalf("%s: got %v, want ErrAborted", what, err)
	}
	var ae *transport.AbortError
	if !errors.As(err, &ae) {
		t.Fatalf("%s: %v is not an *AbortError", what, err)
	}
	if ae.Origin != 0 || ae.Group != 9 || ae.Seq != 4 {
		t.Fatalf("%s: abort origin %d group %d seq %d, want 0 9 4", what, ae.Origin, ae.Group, ae.Seq)
	}
	if !strings.Contains(err.Error(), errCause.Error()) || !strings.Contains(err.Error(), "rank 0") {
		t.Fatalf("%s: %q does not name the cause and origin", what, err)
	}
}

// Abort touches only its (Group, Seq).
func testAbortScope(t *testing.T, mk MakeFunc) {
	ts := group(t, mk, 2)
	ctx := ctxLong(t)
	ts[1].Abort(transport.Tag{Group: 10, Seq: 1}, errCause)
	for _, tag := range []transport.Tag{{Group: 10, Seq: 2}, {Group: 11, Seq: 1}} {
		exchange(ctx, t, ts, 0, 1, tag, []byte{4})
	}
	// A second Abort of the same collective does not replace the first.
	ts[0].Abort(transport.Tag{Group: 10, Seq: 1}, errors.New("second"))
	c, cancel := context.WithTimeout(context.Background(), Prompt)
	defer cancel()
	err := ts[0].Recv(c, 1, transport.Tag{Group: 10, Seq: 1}, nil)
	var ae *transport.AbortError
	for errors.As(err, &ae) && ae.Origin != 1 && c.Err() == nil {
		err = ts[0].Recv(c, 1, transport.Tag{Group: 10, Seq: 1}, nil)
	}
	if !errors.As(err, &ae) || ae.Origin != 1 || !strings.Contains(err.Error(), errCause.Error()) {
		t.Fatalf("got %v, want the first abort (origin 1)", err)
	}
}

// Closing a rank fails its own operations with ErrClosed and its peers'
// with ErrPeerLost, promptly, pending and future alike.
func testClose(t *testing.T, mk MakeFunc) {
	const n = 3
	ts := group(t, mk, n)
	ctx := ctxLong(t)
	peerRecv := Async(func() error { return ts[0].Recv(ctx, 2, transport.Tag{Group: 12}, make([]byte, 4)) })
	ownRecv := Async(func() error { return ts[2].Recv(ctx, 1, transport.Tag{Group: 12, Seq: 1}, make([]byte, 4)) })
	time.Sleep(10 * time.Millisecond)
	if err := ts[2].Close(); err != nil {
		t.Fatal(err)
	}
	if err := Await(t, peerRecv, Prompt, "peer's recv"); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("peer's pending recv: got %v, want ErrPeerLost", err)
	}
	if err := Await(t, ownRecv, Prompt, "own recv"); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("own pending recv: got %v, want ErrClosed", err)
	}
	if err := ts[2].Send(ctx, 0, transport.Tag{Group: 12, Seq: 2}, []byte{1}); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("send after close: got %v, want ErrClosed", err)
	}
	c, cancel := context.WithTimeout(context.Background(), Prompt)
	defer cancel()
	if err := ts[1].Send(c, 2, transport.Tag{Group: 12, Seq: 3}, make([]byte, 1<<20)); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("send to closed peer: got %v, want ErrPeerLost", err)
	}
	if err := ts[0].Recv(c, 2, transport.Tag{Group: 12, Seq: 4}, nil); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("recv from closed peer: got %v, want ErrPeerLost", err)
	}
	if err := ts[2].Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	exchange(ctx, t, ts, 0, 1, transport.Tag{Group: 12, Seq: 5}, []byte{7}) // the survivors still work
}

// Many exchanges on distinct tags, all pairs, at once.
func testConcurrent(t *testing.T, mk MakeFunc) {
	allPairs(t, group(t, mk, 4), 16, func(s, d, i int) (transport.Tag, int) {
		return transport.Tag{Group: uint64(i % 3), Seq: uint64(i), Step: uint32(s*4 + d)}, 1 + i*513
	})
}
