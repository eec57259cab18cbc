package msg_test

import (
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// held waits until rank r holds what want says of peer's messages (tag
// queues, announced messages, window bytes), or fails t.
func held(t *testing.T, e *msg.Endpoint, peer int, want [3]int64) {
	t.Helper()
	var got [3]int64
	for deadline := time.Now().Add(transporttest.Long); ; time.Sleep(time.Millisecond) {
		q, a, w := e.Held(peer)
		got = [3]int64{int64(q), int64(a), w}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("held (queues, announced, window bytes) %v; want %v", got, want)
		}
	}
}

// TestRetireFreesWhatArrived: the eager and announced messages of a group
// that wait for their Recvs are dropped at its Retire, their window bytes
// handed back (the sender then fills the whole window again); the
// announced message's sender fails with ErrStale from the retiring rank;
// another group's message stays; later messages of the group are dropped
// as they arrive, and the sender never stalls on the window.
func TestRetireFreesWhatArrived(t *testing.T) {
	const old, fresh = 30, 31
	g := newGroup(t, 2, transporttest.PipeConfig{}, msg.Config{})
	ctx := ctxOf(t, transporttest.Long)
	small := fill(1<<10, 1)
	cost := int64(len(small) + msg.Overhead)
	for i := range 10 {
		if err := g.eps[0].Send(ctx, 1, tagOf(old, uint64(i)), small); err != nil {
			t.Fatal(err)
		}
	}
	announced := transporttest.Async(func() error {
		return g.eps[0].Send(ctx, 1, tagOf(old, 20), fill(5*transporttest.DefaultPipe.EagerMax, 2))
	})
	if err := g.eps[0].Send(ctx, 1, tagOf(fresh, 1), small); err != nil {
		t.Fatal(err)
	}
	held(t, g.eps[1], 0, [3]int64{12, 1, 11 * cost})
	g.eps[1].Retire(old)
	held(t, g.eps[1], 0, [3]int64{1, 0, cost})
	err := transporttest.Await(t, announced, transporttest.Prompt, "the announced Send")
	var ae *transport.AbortError
	if !errors.Is(err, transport.ErrStale) || !errors.As(err, &ae) || ae.Origin != 1 {
		t.Fatalf("the announced message's Send: %v; want ErrStale from rank 1", err)
	}
	got := make([]byte, len(small))
	if err := g.eps[1].Recv(ctx, 0, tagOf(fresh, 1), got); err != nil {
		t.Fatal(err)
	}
	// Forty windows' worth into the retired group: dropped on arrival (a
	// message that finds the window full waits for its Recv, and is
	// refused).
	for i := range 40 * transporttest.DefaultPipe.Window / (1 << 10) {
		err := g.eps[0].Send(ctx, 1, tagOf(old, 100+uint64(i)), small)
		if err != nil && !errors.Is(err, transport.ErrStale) {
			t.Fatalf("Send %d into the retired group: %v", i, err)
		}
	}
	held(t, g.eps[1], 0, [3]int64{0, 0, 0})
	// The whole window is the sender's again (the last bytes by the next
	// heartbeat): as many messages as fit go eagerly, no Recv posted.
	n := transporttest.DefaultPipe.Window / int(cost)
	deadline := time.Now().Add(transporttest.Long)
	for i := 0; i < n; {
		done, err := g.eps[0].TrySend(ctx, 1, tagOf(fresh, 2), small)
		switch {
		case err != nil:
			t.Fatal(err)
		case done:
			i++
		case time.Now().After(deadline):
			t.Fatalf("only %d of the %d messages that fit the window went", i, n)
		default:
			time.Sleep(time.Millisecond)
		}
	}
}

// TestRetireEndsStreamingRecv: a Recv of the group whose message streams
// in fails with ErrStale at the Retire; the rest of the message is read
// and dropped (its Send returns nil, or ErrStale where the Retire came
// before the answer), nothing stays held, and the pair works on.
func TestRetireEndsStreamingRecv(t *testing.T) {
	const old, fresh = 32, 33
	g := newGroup(t, 2, transporttest.PipeConfig{Chunk: 64}, msg.Config{})
	ctx := ctxOf(t, transporttest.Long)
	const n = 2 << 20
	recv := transporttest.Async(func() error { return g.eps[1].Recv(ctx, 0, tagOf(old, 1), make([]byte, n)) })
	time.Sleep(transporttest.Short)
	send := transporttest.Async(func() error { return g.eps[0].Send(ctx, 1, tagOf(old, 1), fill(n, 3)) })
	time.Sleep(2 * time.Millisecond)
	g.eps[1].Retire(old)
	if err := transporttest.Await(t, recv, transporttest.Prompt, "the streaming Recv"); !errors.Is(err, transport.ErrStale) {
		t.Fatalf("the streaming Recv: %v; want ErrStale", err)
	}
	if err := transporttest.Await(t, send, transporttest.Long, "its Send"); err != nil && !errors.Is(err, transport.ErrStale) {
		t.Fatalf("its Send: %v; want nil or ErrStale", err)
	}
	g.noHolds(t)
	held(t, g.eps[1], 0, [3]int64{0, 0, 0})
	data := fill(n, 4)
	sent := transporttest.Async(func() error { return g.eps[0].Send(ctx, 1, tagOf(fresh, 1), data) })
	got := make([]byte, n)
	if err := g.eps[1].Recv(ctx, 0, tagOf(fresh, 1), got); err != nil || string(got) != string(data) {
		t.Fatalf("the next group's exchange: %v", err)
	}
	if err := transporttest.Await(t, sent, transporttest.Long, "the next Send"); err != nil {
		t.Fatal(err)
	}
}
