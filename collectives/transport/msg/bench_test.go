package msg_test

import (
	"context"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// BenchmarkPingPong is a round trip of one message each way between two
// endpoints over pipes: the engine's cost per message (the pipe's is a
// copy and a goroutine hand-off), eager and rendezvous; and eager once
// both endpoints retired other groups.
func BenchmarkPingPong(b *testing.B) {
	for _, c := range []struct {
		name    string
		n       int
		pc      transporttest.PipeConfig
		retired int // groups retired before
	}{
		{"eager-1KiB", 1 << 10, transporttest.PipeConfig{}, 0},
		{"eager-1KiB-retired", 1 << 10, transporttest.PipeConfig{}, 4096},
		{"rendezvous-1MiB", 1 << 20, transporttest.PipeConfig{Chunk: 256 << 10}, 0},
		{"single-copy-1MiB", 1 << 20, transporttest.PipeConfig{SingleCopyMin: 1}, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			eps, _, err := transporttest.PipeEndpoints(2, c.pc, msg.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer eps[0].Close()
			defer eps[1].Close()
			for g := range c.retired {
				eps[0].Retire(uint64(1000 + g))
				eps[1].Retire(uint64(1000 + g))
			}
			ctx := context.Background()
			out, in := make([]byte, c.n), make([]byte, c.n)
			tag := tagOf(1, 1)
			done := make(chan error, 1)
			go func() {
				for range b.N {
					if err := eps[1].Recv(ctx, 0, tag, in); err != nil {
						done <- err
						return
					}
					if err := eps[1].Send(ctx, 0, tag, in); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			b.SetBytes(int64(2 * c.n))
			b.ResetTimer()
			for range b.N {
				if err := eps[0].Send(ctx, 1, tag, out); err != nil {
					b.Fatal(err)
				}
				if err := eps[0].Recv(ctx, 1, tag, out); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
