package tcp

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// BenchmarkLoopback measures two ranks on loopback, and beside them, in
// the same run, a plain Go TCP socket pair moving the same bytes the same
// way (like with like):
//
//   - oneway-64MiB: rank 0 sends 64 MiB messages that rank 1 receives
//     (bytes/s is the one-way bandwidth). The socket writes 64 MiB and
//     its peer reads 64 MiB into one buffer.
//   - rtt-4KiB: rank 0 sends 4 KiB, rank 1 receives it and sends 4 KiB
//     back (ns/op is the round trip). The socket echoes the same way.
//
// Run: go test -run='^$' -bench=Loopback ./collectives/transport/tcp
func BenchmarkLoopback(b *testing.B) {
	b.Run("oneway-64MiB/choreo", func(b *testing.B) { benchChoreo(b, 64<<20, false) })
	b.Run("oneway-64MiB/socket", func(b *testing.B) { benchSocket(b, 64<<20, false) })
	b.Run("rtt-4KiB/choreo", func(b *testing.B) { benchChoreo(b, 4<<10, true) })
	b.Run("rtt-4KiB/socket", func(b *testing.B) { benchSocket(b, 4<<10, true) })
}

func benchChoreo(b *testing.B, size int, echo bool) {
	ts := build(b, 2, nil)
	defer closeAll(ts)
	// Collectives run under a deadline: so does the benchmark.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	out, in := make([]byte, size), make([]byte, size)
	for i := range out {
		out[i] = byte(i)
	}
	done := make(chan error, 1)
	n := b.N
	go func() {
		for i := range n {
			tag := transport.Tag{Group: 1, Seq: uint64(i)}
			if err := ts[1].Recv(ctx, 0, tag, in); err != nil {
				done <- err
				return
			}
			if echo {
				tag.Step = 1
				if err := ts[1].Send(ctx, 0, tag, in); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	back := make([]byte, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := range n {
		tag := transport.Tag{Group: 1, Seq: uint64(i)}
		if err := ts[0].Send(ctx, 1, tag, out); err != nil {
			b.Fatal(err)
		}
		if echo {
			tag.Step = 1
			if err := ts[0].Recv(ctx, 1, tag, back); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

func benchSocket(b *testing.B, size int, echo bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	c, ok := <-accepted
	if !ok {
		b.Fatal("accept failed")
	}
	defer c.Close()
	out, in := make([]byte, size), make([]byte, size)
	done := make(chan error, 1)
	n := b.N
	go func() {
		for range n {
			if _, err := io.ReadFull(c, in); err != nil {
				done <- err
				return
			}
			if echo {
				if _, err := c.Write(in); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	back := make([]byte, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	for range n {
		if _, err := a.Write(out); err != nil {
			b.Fatal(err)
		}
		if echo {
			if _, err := io.ReadFull(a, back); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
