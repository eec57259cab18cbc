package transporttest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// The groups the Retire checks use: old is retired, fresh is the group
// that replaces it, other is a bystander.
const (
	retOld   = 40
	retFresh = 41
	retOther = 42
)

// bigMsg is larger than any eager limit: it waits for its Recv.
const bigMsg = 4<<20 + 5

// testRetire checks transport.Retirer where the transports implement it.
func testRetire(t *testing.T, mk MakeFunc) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, []transport.Transport)
	}{
		{"FailsCalls", testRetireFailsCalls},
		{"DropsMessages", testRetireDropsMessages},
		{"RefusesRendezvous", testRetireRefusesRendezvous},
		{"NothingAccumulates", testRetireNothingAccumulates},
		{"Memory", testRetireMemory},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := group(t, mk, 3)
			if _, ok := ts[0].(transport.Retirer); !ok {
				t.Skipf("%T is not a transport.Retirer", ts[0])
			}
			c.fn(t, ts)
		})
	}
}

func retire(tr transport.Transport, group uint64) { tr.(transport.Retirer).Retire(group) }

// staleOrNil fails t unless err is nil or wraps ErrStale.
func staleOrNil(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil && !errors.Is(err, transport.ErrStale) {
		t.Fatalf("%s: %v; want nil or ErrStale", what, err)
	}
}

func wantStale(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, transport.ErrStale) {
		t.Fatalf("%s: %v; want ErrStale", what, err)
	}
}

// Pending and later Sends and Recvs of a retired group fail with ErrStale
// (promptly: not at their deadline); the other groups work on.
func testRetireFailsCalls(t *testing.T, ts []transport.Transport) {
	ctx := ctxLong(t)
	old := transport.Tag{Group: retOld, Seq: 1}
	recv := Async(func() error { return ts[1].Recv(ctx, 0, old, make([]byte, 8)) })
	send := Async(func() error { return ts[1].Send(ctx, 0, old.WithStep(1), pattern(bigMsg, 1)) })
	time.Sleep(10 * time.Millisecond)
	start := time.Now()
	retire(ts[1], retOld)
	wantStale(t, Await(t, recv, Prompt, "pending recv"), "a pending Recv of the retired group")
	wantStale(t, Await(t, send, Prompt, "pending send"), "a pending rendezvous Send of the retired group")
	retire(ts[1], retOld) // idempotent
	wantStale(t, ts[1].Recv(ctx, 2, old.WithStep(2), make([]byte, 8)), "a later Recv")
	wantStale(t, ts[1].Send(ctx, 2, old.WithStep(3), []byte{1}), "a later Send")
	wantStale(t, ts[1].Send(ctx, 0, old.WithStep(4), pattern(bigMsg, 2)), "a later rendezvous Send")
	if el := time.Since(start); el > Prompt {
		t.Fatalf("the retired group's calls took %v to fail", el)
	}
	// Other groups, and the retired group between other ranks, work on.
	exchange(ctx, t, ts, 0, 1, transport.Tag{Group: retFresh, Seq: 1}, pattern(100, 3))
	exchange(ctx, t, ts, 1, 0, transport.Tag{Group: retFresh, Seq: 1}, pattern(bigMsg, 4))
	exchange(ctx, t, ts, 0, 2, transport.Tag{Group: retOther, Seq: 1}, pattern(100, 5))
	exchange(ctx, t, ts, 2, 0, transport.Tag{Group: retOld, Seq: 9}, pattern(100, 6))
}

// Messages of a retired group, sent before or after the Retire, are
// never received: not by a Recv of the retired group (which fails) nor by
// one of the group that replaces it, which gets its own message.
func testRetireDropsMessages(t *testing.T, ts []transport.Transport) {
	ctx := ctxLong(t)
	old := transport.Tag{Group: retOld, Seq: 3, Step: 1}
	fresh := transport.Tag{Group: retFresh, Seq: 3, Step: 1}
	const n = 100
	before := Async(func() error { return ts[0].Send(ctx, 1, old, pattern(n, 7)) })
	time.Sleep(10 * time.Millisecond)
	retire(ts[1], retOld)
	staleOrNil(t, Await(t, before, Prompt, "send before the retire"), "a Send before the Retire")
	after := Async(func() error { return ts[0].Send(ctx, 1, old, pattern(n, 8)) })
	staleOrNil(t, Await(t, after, Prompt, "send after the retire"), "a Send after the Retire")
	wantStale(t, ts[1].Recv(ctx, 0, old, make([]byte, n)), "a Recv of the retired group")
	exchange(ctx, t, ts, 0, 1, fresh, pattern(n, 9))
	// Nothing more is there for the new group.
	c, cancel := context.WithTimeout(context.Background(), Short)
	defer cancel()
	got := make([]byte, n)
	if err := ts[1].Recv(c, 0, fresh, got); !errors.Is(err, transport.ErrTimeout) {
		t.Fatalf("a second Recv of the new group: %v (bytes of the old: %v); want ErrTimeout",
			err, bytes.Equal(got, pattern(n, 7)) || bytes.Equal(got, pattern(n, 8)))
	}
}

// A Send that waits for its Recv (rendezvous) to a rank that retired the
// group fails with ErrStale within Prompt, not at its deadline: one that
// waited already when the group was retired, and one sent after.
func testRetireRefusesRendezvous(t *testing.T, ts []transport.Transport) {
	ctx := ctxLong(t)
	early := Async(func() error {
		return ts[0].Send(ctx, 1, transport.Tag{Group: retOld, Seq: 4}, pattern(bigMsg, 10))
	})
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	retire(ts[1], retOld)
	wantStale(t, Await(t, early, Prompt, "waiting rendezvous send"), "a rendezvous Send waiting at the Retire")
	late := Async(func() error {
		return ts[0].Send(ctx, 1, transport.Tag{Group: retOld, Seq: 5}, pattern(bigMsg, 11))
	})
	wantStale(t, Await(t, late, Prompt, "later rendezvous send"), "a rendezvous Send after the Retire")
	if el := time.Since(start); el > Prompt {
		t.Fatalf("the refused Sends took %v", el)
	}
	exchange(ctx, t, ts, 0, 1, transport.Tag{Group: retFresh, Seq: 4}, pattern(bigMsg, 12))
	exchange(ctx, t, ts, 1, 2, transport.Tag{Group: retOther, Seq: 4}, pattern(bigMsg, 13))
}

// A peer that keeps sending into a retired group (8 MiB, more than any
// receiver's window) neither stalls nor fills the receiver: each Send
// returns nil or ErrStale, and the pair works on.
func testRetireNothingAccumulates(t *testing.T, ts []transport.Transport) {
	ctx := ctxLong(t)
	retire(ts[1], retOld)
	data := pattern(8<<10, 14)
	done := Async(func() error {
		for range 1024 {
			err := ts[0].Send(ctx, 1, transport.Tag{Group: retOld, Seq: 6, Step: 1}, data)
			if err != nil && !errors.Is(err, transport.ErrStale) {
				return err
			}
		}
		return nil
	})
	if err := Await(t, done, Long+Prompt, "1024 sends into the retired group"); err != nil {
		t.Fatalf("sending into a retired group: %v", err)
	}
	exchange(ctx, t, ts, 0, 1, transport.Tag{Group: retFresh, Seq: 6}, pattern(bigMsg, 15))
	exchange(ctx, t, ts, 0, 1, transport.Tag{Group: retFresh, Seq: 7}, data)
}

// A transport remembers at least the last 4096 retired groups.
func testRetireMemory(t *testing.T, ts []transport.Transport) {
	ctx := ctxLong(t)
	const first, n = 1000, 3 * transport.RetireMemory
	for g := uint64(first); g < first+n; g++ {
		retire(ts[1], g)
	}
	for g := uint64(first + n - 4096); g < first+n; g += 97 {
		wantStale(t, ts[1].Recv(ctx, 0, transport.Tag{Group: g}, nil), "a Recv of one of the last 4096 retired groups")
	}
	wantStale(t, ts[1].Send(ctx, 0, transport.Tag{Group: first + n - 1}, nil), "a Send of the last retired group")
	exchange(ctx, t, ts, 0, 1, transport.Tag{Group: first + n}, pattern(10, 16))
}
