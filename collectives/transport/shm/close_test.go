package shm

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// A rank that closes as soon as its own calls returned loses its peer
// nothing: what it published is still received, though its close left
// frames of the peer's unread (which resets the peer's socket) and the
// peer's frames to it then fail to go out.
func TestCloseAfterExchangeDelivers(t *testing.T) {
	for round := range 10 {
		ts := build(t, 2, func(c *Config) {
			c.SlotSize = 16 << 10
			c.Slots = 4
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer ts[r].Close()
				errs[r] = exchange(ctx, ts[r], 1-r, 1<<20)
			}()
		}
		wg.Wait()
		cancel()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("round %d: rank %d: %v", round, r, err)
			}
		}
	}
}

// exchange sends size bytes to peer while it receives as many from it,
// and checks them.
func exchange(ctx context.Context, tr *endpoint, peer, size int) error {
	out, in := make([]byte, size), make([]byte, size)
	for i := range out {
		out[i] = byte(tr.Rank() + i)
	}
	sent := make(chan error, 1)
	go func() { sent <- tr.Send(ctx, peer, transport.Tag{Group: 4, Step: uint32(tr.Rank())}, out) }()
	err := tr.Recv(ctx, peer, transport.Tag{Group: 4, Step: uint32(peer)}, in)
	if serr := <-sent; err == nil {
		err = serr
	}
	if err == nil && in[size-1] != byte(peer+size-1) {
		err = fmt.Errorf("wrong bytes from rank %d", peer)
	}
	return err
}
