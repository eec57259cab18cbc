package tcp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Readers run only while something waits on them: after eager and
// rendezvous messages, a Recv that ends mid-message and an abort, every
// connection's count of waiters is back to zero and its reader stops, so
// the next Recv reads its message itself (conn.readFor).
func TestReadersStopWhenNothingWaits(t *testing.T) {
	ts := build(t, 2, func(c *Config) { c.MaxFrame = 64 << 10 })
	defer closeAll(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tag := func(i int) transport.Tag { return transport.Tag{Group: 5, Seq: uint64(i)} }
	for i, size := range []int{1, 4 << 10, 1 << 20} {
		sent := make(chan error, 1)
		go func() { sent <- ts[0].Send(ctx, 1, tag(i), make([]byte, size)) }()
		if err := ts[1].Recv(ctx, 0, tag(i), make([]byte, size)); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if err := <-sent; err != nil {
			t.Fatalf("size %d: send: %v", size, err)
		}
	}
	// A Recv that ends while its message streams in.
	short, stop := context.WithCancel(ctx)
	sent := make(chan error, 1)
	go func() { sent <- ts[0].Send(ctx, 1, tag(3), make([]byte, 8<<20)) }()
	go waitArriving(ts[1], 0, stop, ctx.Done())
	_ = ts[1].Recv(short, 0, tag(3), make([]byte, 8<<20))
	if err := <-sent; err != nil {
		t.Fatalf("send after the Recv ended: %v", err)
	}
	// An abort while a Recv waits.
	aborted := make(chan error, 1)
	go func() { aborted <- ts[1].Recv(ctx, 0, tag(4), make([]byte, 10)) }()
	ts[0].Abort(tag(4), errors.New("test abort"))
	if err := <-aborted; !errors.Is(err, transport.ErrAborted) {
		t.Fatalf("aborted recv: %v", err)
	}
	for r, tr := range ts {
		for _, p := range tr.links {
			if p == nil {
				continue
			}
			for i, c := range p.conns {
				for c.waiters.Load() != 0 || readingNow(c) {
					select {
					case <-ctx.Done():
						t.Fatalf("rank %d conn %d: %d waiters, reading %v", r, i, c.waiters.Load(), readingNow(c))
					case <-time.After(time.Millisecond):
					}
				}
			}
		}
	}
}

func readingNow(c *conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reading
}
