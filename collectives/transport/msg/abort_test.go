package msg_test

import (
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// TestAbortScope: an abort fails a rendezvous Send waiting for its answer
// and a Recv waiting for its message, on other ranks, with the origin and
// cause; another collective between the same ranks goes on; later calls
// of the aborted collective fail at once, and a second abort of it (with
// another cause, from another rank) changes nothing. No Hold is left.
func TestAbortScope(t *testing.T) {
	g := newGroup(t, 3, transporttest.PipeConfig{}, msg.Config{})
	ctx := ctxOf(t, transporttest.Long)
	x, y := tagOf(1, 1), tagOf(1, 2)
	big := fill(4*transporttest.DefaultPipe.EagerMax, 1)
	send := transporttest.Async(func() error { return g.eps[0].Send(ctx, 1, x, big) })
	recv := transporttest.Async(func() error { return g.eps[2].Recv(ctx, 1, x, make([]byte, 8)) })
	other := transporttest.Async(func() error { return g.eps[1].Recv(ctx, 0, y, make([]byte, len(big))) })
	cause := errors.New("rank 1 gives up")
	g.eps[1].Abort(x, cause)
	for _, c := range []struct {
		ch   <-chan error
		what string
	}{{send, "rank 0's Send"}, {recv, "rank 2's Recv"}} {
		err := transporttest.Await(t, c.ch, transporttest.Prompt, c.what)
		var ae *transport.AbortError
		if !errors.As(err, &ae) || ae.Origin != 1 || ae.Cause.Error() != cause.Error() {
			t.Fatalf("%s: %v; want the abort of rank 1", c.what, err)
		}
	}
	if err := g.eps[0].Send(ctx, 1, y, big); err != nil {
		t.Fatalf("the other collective: %v", err)
	}
	if err := transporttest.Await(t, other, transporttest.Long, "the other collective's Recv"); err != nil {
		t.Fatal(err)
	}
	g.eps[2].Abort(x, errors.New("a second abort"))
	err := g.eps[0].Send(ctx, 2, x.WithStep(3), []byte{1})
	var ae *transport.AbortError
	if !errors.As(err, &ae) || ae.Origin != 1 {
		t.Fatalf("a later Send of the aborted collective: %v; want rank 1's abort", err)
	}
	g.noHolds(t)
}

// TestAbortDropsHeldMessages: messages that wait for their Recv when
// their collective is aborted are dropped (their window comes back), and
// the Recvs posted afterwards fail.
func TestAbortDropsHeldMessages(t *testing.T) {
	cfg := transporttest.PipeConfig{EagerMax: 100, Window: 4 * (100 + msg.Overhead)}
	g := newGroup(t, 2, cfg, msg.Config{})
	ctx := ctxOf(t, transporttest.Long)
	x := tagOf(2, 1)
	for i := range 4 {
		if done, err := g.eps[0].TrySend(ctx, 1, x.WithStep(uint32(i)), fill(100, 0)); !done || err != nil {
			t.Fatalf("message %d: %v %v", i, done, err)
		}
	}
	g.eps[0].Abort(x, errors.New("stop"))
	// A Recv of a message never sent ends once the abort reached rank 1;
	// then the held messages are gone.
	for _, step := range []uint32{9, 0} {
		if err := g.eps[1].Recv(ctx, 0, x.WithStep(step), make([]byte, 100)); !errors.Is(err, transport.ErrAborted) {
			t.Fatalf("Recv of step %d of an aborted collective: %v", step, err)
		}
	}
	// The window comes back: four messages go at once again.
	y := tagOf(2, 2)
	deadline := time.Now().Add(transporttest.Long)
	for i := 0; i < 4; {
		done, err := g.eps[0].TrySend(ctx, 1, y.WithStep(uint32(i)), fill(100, 1))
		switch {
		case err != nil:
			t.Fatal(err)
		case done:
			i++
		case time.Now().After(deadline):
			t.Fatalf("the window of the aborted messages never came back (message %d)", i)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	for i := range 4 {
		if err := g.eps[1].Recv(ctx, 0, y.WithStep(uint32(i)), make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	g.noHolds(t)
}
