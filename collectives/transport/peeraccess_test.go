package transport_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

var errCause = errors.New("cause-for-test")

// group makes n endpoints and closes them when the test ends.
func group(t *testing.T, mk transporttest.MakeFunc, n int) []transport.Transport {
	ts := mk(t, n)
	t.Cleanup(func() {
		for _, tr := range ts {
			_ = tr.Close()
		}
	})
	return ts
}

func ctxLong(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), transporttest.Long)
	t.Cleanup(cancel)
	return ctx
}

// testPeerAccess checks PeerAccess: windows over phases, an abort, a
// rank that never exposes, a peer that closes, a rank exposing twice.
func testPeerAccess(t *testing.T, mk transporttest.MakeFunc) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, transporttest.MakeFunc)
	}{
		{"Phases", testWindowPhases},
		{"Abort", testWindowAbort},
		{"Absent", testWindowAbsent},
		{"Close", testWindowClose},
		{"Twice", testWindowTwice},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, mk) })
	}
}

func expose(t *testing.T, ts []transport.Transport, r int, ctx context.Context, tag transport.Tag, bufs ...[]byte) (transport.Window, error) {
	t.Helper()
	return ts[r].(transport.PeerAccess).Expose(ctx, tag, bufs...)
}

// Each rank writes its slot of its own buffer, then after a Sync every rank
// reads every peer's slot; repeated over a few phases.
func testWindowPhases(t *testing.T, mk transporttest.MakeFunc) {
	const n, phases = 3, 4
	ts := group(t, mk, n)
	ctx := ctxLong(t)
	tag := transport.Tag{Group: 20, Seq: 1}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				mine := make([]byte, phases)
				meta := []byte{byte(r)}
				w, err := expose(t, ts, r, ctx, tag, meta, mine)
				if err != nil {
					return err
				}
				defer w.Leave()
				for p := 0; p < n; p++ {
					if b := w.Buffers(p); len(b) != 2 || b[0][0] != byte(p) {
						return fmt.Errorf("rank %d: Buffers(%d) = %v", r, p, b)
					}
				}
				for ph := 0; ph < phases; ph++ {
					mine[ph] = byte(10*r + ph)
					if err := w.Sync(ctx); err != nil {
						return err
					}
					for p := 0; p < n; p++ {
						if got := w.Buffers(p)[1][ph]; got != byte(10*p+ph) {
							return fmt.Errorf("rank %d phase %d: peer %d slot = %d", r, ph, p, got)
						}
					}
				}
				return w.Sync(ctx)
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// An Abort fails every rank's window wait.
func testWindowAbort(t *testing.T, mk transporttest.MakeFunc) {
	const n = 3
	ts := group(t, mk, n)
	ctx := ctxLong(t)
	tag := transport.Tag{Group: 21, Seq: 1}
	var chs []<-chan error
	for r := 0; r < n; r++ {
		chs = append(chs, transporttest.Async(func() error {
			w, err := expose(t, ts, r, ctx, tag, make([]byte, 8))
			if err != nil {
				return err
			}
			defer w.Leave()
			if r == 2 {
				ts[2].Abort(transport.Tag{Group: 21, Seq: 1, Step: 9}, errCause)
			}
			return w.Sync(ctx)
		}))
	}
	for r, ch := range chs {
		err := transporttest.Await(t, ch, transporttest.Prompt, "window sync")
		var ae *transport.AbortError
		if !errors.As(err, &ae) || ae.Origin != 2 || !errors.Is(err, errCause) && !errors.Is(err, transport.ErrAborted) {
			t.Fatalf("rank %d: got %v, want abort by rank 2", r, err)
		}
	}
}

// A rank that never exposes: the one whose deadline passes fails with
// ErrTimeout, and the others fail promptly after that, not at their own
// (later) deadline.
func testWindowAbsent(t *testing.T, mk transporttest.MakeFunc) {
	ts := group(t, mk, 3)
	tag := transport.Tag{Group: 22, Seq: 1}
	short, cancel := context.WithTimeout(context.Background(), transporttest.Short)
	defer cancel()
	long := ctxLong(t)
	other := transporttest.Async(func() error {
		_, err := expose(t, ts, 1, long, tag, nil)
		return err
	})
	start := time.Now()
	if _, err := expose(t, ts, 0, short, tag, nil); !errors.Is(err, transport.ErrTimeout) {
		t.Fatalf("rank 0: got %v, want ErrTimeout", err)
	}
	if err := transporttest.Await(t, other, transporttest.Prompt, "rank 1 expose"); !errors.Is(err, transport.ErrAborted) {
		t.Fatalf("rank 1: got %v, want ErrAborted", err)
	}
	if el := time.Since(start); el > transporttest.Prompt {
		t.Fatalf("took %v", el)
	}
	if _, err := expose(t, ts, 2, long, tag, nil); !errors.Is(err, transport.ErrAborted) {
		t.Fatalf("late rank 2: got %v, want ErrAborted", err)
	}
}

func testWindowClose(t *testing.T, mk transporttest.MakeFunc) {
	ts := group(t, mk, 2)
	ctx := ctxLong(t)
	ch := transporttest.Async(func() error {
		_, err := expose(t, ts, 0, ctx, transport.Tag{Group: 23}, nil)
		return err
	})
	time.Sleep(10 * time.Millisecond)
	_ = ts[1].Close()
	if err := transporttest.Await(t, ch, transporttest.Prompt, "expose"); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("got %v, want ErrPeerLost", err)
	}
	if _, err := expose(t, ts, 0, ctx, transport.Tag{Group: 23, Seq: 1}, nil); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("later expose: got %v, want ErrPeerLost", err)
	}
}

func testWindowTwice(t *testing.T, mk transporttest.MakeFunc) {
	ts := group(t, mk, 2)
	tag := transport.Tag{Group: 24}
	c, cancel := context.WithTimeout(context.Background(), transporttest.Short)
	defer cancel()
	first := transporttest.Async(func() error {
		_, err := expose(t, ts, 0, c, tag, nil)
		return err
	})
	time.Sleep(5 * time.Millisecond)
	if _, err := expose(t, ts, 0, ctxLong(t), tag, nil); !errors.Is(err, transport.ErrBadArgument) && !errors.Is(err, transport.ErrAborted) {
		t.Fatalf("second expose: got %v, want ErrBadArgument", err)
	}
	_ = transporttest.Await(t, first, transporttest.Prompt, "first expose")
}
