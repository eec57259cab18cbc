package msg_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// TestSizeMismatch: a Recv whose buffer is larger or smaller than the
// message fails with ErrSizeMismatch and consumes it, eager or announced,
// whether the Recv came first or the message; an eager Send returns nil,
// an announced one ErrSizeMismatch. The tag's next message is received
// whole.
func TestSizeMismatch(t *testing.T) {
	for _, pc := range []transporttest.PipeConfig{{}, {SingleCopyMin: 1}} {
		g := newGroup(t, 2, pc, msg.Config{})
		ctx := ctxOf(t, transporttest.Long)
		eager, large := 100, 3*transporttest.DefaultPipe.EagerMax
		step := uint32(0)
		for _, n := range []int{eager, large} {
			for _, delta := range []int{-1, 1} {
				for _, recvFirst := range []bool{false, true} {
					step++
					tag := tagOf(3, 1).WithStep(step)
					sendErr, recvErr := mismatch(t, g, tag, n, n+delta, recvFirst)
					if !errors.Is(recvErr, transport.ErrSizeMismatch) {
						t.Fatalf("%d bytes into %d (Recv first %v): Recv %v", n, n+delta, recvFirst, recvErr)
					}
					if want := n > eager; errors.Is(sendErr, transport.ErrSizeMismatch) != want || (!want && sendErr != nil) {
						t.Fatalf("%d bytes into %d: Send %v", n, n+delta, sendErr)
					}
					next := fill(n, byte(step))
					ch := transporttest.Async(func() error { return g.eps[0].Send(ctx, 1, tag, next) })
					got := make([]byte, n)
					if err := g.eps[1].Recv(ctx, 0, tag, got); err != nil || !bytes.Equal(got, next) {
						t.Fatalf("the next message: %v", err)
					}
					if err := transporttest.Await(t, ch, transporttest.Long, "the next Send"); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		g.noHolds(t)
	}
}

// mismatch sends n bytes under tag from rank 0 and receives them into m
// bytes on rank 1, the Recv posted first or last.
func mismatch(t *testing.T, g *group, tag transport.Tag, n, m int, recvFirst bool) (sendErr, recvErr error) {
	ctx := ctxOf(t, transporttest.Long)
	var recv <-chan error
	if recvFirst {
		recv = transporttest.Async(func() error { return g.eps[1].Recv(ctx, 0, tag, make([]byte, m)) })
		time.Sleep(transporttest.Short)
	}
	send := transporttest.Async(func() error { return g.eps[0].Send(ctx, 1, tag, fill(n, 0)) })
	if !recvFirst {
		time.Sleep(transporttest.Short)
		recv = transporttest.Async(func() error { return g.eps[1].Recv(ctx, 0, tag, make([]byte, m)) })
	}
	return transporttest.Await(t, send, transporttest.Long, "Send"), transporttest.Await(t, recv, transporttest.Long, "Recv")
}
