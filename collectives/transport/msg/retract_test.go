package msg_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// TestRetractBeforeRecv: a rendezvous Send whose context ends before its
// Recv is posted fails with ErrTimeout and withdraws its message (by
// address too: it returns once the receiver answered), so the tag's next
// message is what the Recv gets; the sender may reuse its buffer.
func TestRetractBeforeRecv(t *testing.T) {
	for _, pc := range []transporttest.PipeConfig{{}, {SingleCopyMin: 1}} {
		g := newGroup(t, 2, pc, msg.Config{})
		ctx := ctxOf(t, transporttest.Long)
		tag := tagOf(4, 1)
		buf := fill(5*transporttest.DefaultPipe.EagerMax, 1)
		short, cancel := context.WithTimeout(ctx, transporttest.Short)
		err := g.eps[0].Send(short, 1, tag, buf)
		cancel()
		if !errors.Is(err, transport.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("single copy %v: Send: %v; want a timeout", pc.SingleCopyMin > 0, err)
		}
		copy(buf, fill(len(buf), 2)) // reused at once
		next := fill(len(buf), 3)
		send := transporttest.Async(func() error { return g.eps[0].Send(ctx, 1, tag, next) })
		got := make([]byte, len(buf))
		if err := g.eps[1].Recv(ctx, 0, tag, got); err != nil || !bytes.Equal(got, next) {
			t.Fatalf("single copy %v: the Recv got the withdrawn message (%v)", pc.SingleCopyMin > 0, err)
		}
		if err := transporttest.Await(t, send, transporttest.Long, "the next Send"); err != nil {
			t.Fatal(err)
		}
		g.noHolds(t)
	}
}

// TestRetractWhileStreaming: a Send canceled while its chunks stream into
// a posted Recv retracts its message; the Recv then takes the tag's next
// message, whole (or the first, had it finished before the cancel), never
// a mix.
func TestRetractWhileStreaming(t *testing.T) {
	g := newGroup(t, 2, transporttest.PipeConfig{Chunk: 64}, msg.Config{})
	ctx := ctxOf(t, transporttest.Long)
	tag := tagOf(4, 2)
	const n = 2 << 20
	first, second := fill(n, 1), fill(n, 2)
	got := make([]byte, n)
	recv := transporttest.Async(func() error { return g.eps[1].Recv(ctx, 0, tag, got) })
	time.Sleep(transporttest.Short)
	sctx, cancel := context.WithCancel(ctx)
	send := transporttest.Async(func() error { return g.eps[0].Send(sctx, 1, tag, first) })
	time.Sleep(2 * time.Millisecond)
	cancel()
	err := transporttest.Await(t, send, transporttest.Long, "the canceled Send")
	want := first
	switch {
	case errors.Is(err, context.Canceled):
		want = second
		if err := g.eps[0].Send(ctx, 1, tag, second); err != nil {
			t.Fatal(err)
		}
	case err != nil:
		t.Fatalf("the canceled Send: %v", err)
	default:
		t.Log("the Send finished before its cancel")
	}
	if err := transporttest.Await(t, recv, transporttest.Long, "Recv"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the Recv got a mix of the retracted message and the next")
	}
	g.noHolds(t)
}

// TestSingleCopyCounted: an announced message on pipes that read by
// address is read so (counted), on plain pipes it streams.
func TestSingleCopyCounted(t *testing.T) {
	for _, pc := range []transporttest.PipeConfig{{}, {SingleCopyMin: 1}} {
		g := newGroup(t, 2, pc, msg.Config{})
		ctx := ctxOf(t, transporttest.Long)
		data := fill(3*transporttest.DefaultPipe.Chunk+7, 5)
		send := transporttest.Async(func() error { return g.eps[0].Send(ctx, 1, tagOf(5, 1), data) })
		got := make([]byte, len(data))
		if err := g.eps[1].Recv(ctx, 0, tagOf(5, 1), got); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Recv: %v", err)
		}
		if err := transporttest.Await(t, send, transporttest.Long, "Send"); err != nil {
			t.Fatal(err)
		}
		want := uint64(0)
		if pc.SingleCopyMin > 0 {
			want = 1
		}
		if s := g.eps[1].Stats(); s.SingleCopies != want {
			t.Fatalf("single copy %v: %d messages read by address, want %d", pc.SingleCopyMin > 0, s.SingleCopies, want)
		}
	}
}
