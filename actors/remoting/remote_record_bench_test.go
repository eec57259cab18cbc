package remoting

import (
	"io"
	"net"
	"testing"
	"time"
)

// The record layer's cost on bulk data: 64 MiB through an authenticated
// loopback pair, against the same bytes through a plain loopback pair, in
// 1 MiB writes and reads (as a data plane would move a tensor).
//
//	go test -run '^$' -bench 'Loopback64MiB' ./actors

const (
	benchTotal = 64 << 20
	benchChunk = 1 << 20
)

func BenchmarkRecordLayer64MiB(b *testing.B) {
	cli, srv := pair(b, time.Minute)
	defer func() { _ = cli.Close(); _ = srv.Close() }()
	benchPair(b, cli, srv)
}

func BenchmarkPlainLoopback64MiB(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(acc)
			return
		}
		acc <- c
	}()
	cli, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	srv, ok := <-acc
	if !ok {
		b.Fatal("accept failed")
	}
	defer func() { _ = cli.Close(); _ = srv.Close() }()
	benchPair(b, cli, srv)
}

// benchPair sends benchTotal bytes from w to r per iteration.
func benchPair(b *testing.B, w, r net.Conn) {
	out, in := make([]byte, benchChunk), make([]byte, benchChunk)
	for i := range out {
		out[i] = byte(i)
	}
	b.SetBytes(benchTotal)
	b.ResetTimer()
	for range b.N {
		errc := make(chan error, 1)
		go func() {
			for n := 0; n < benchTotal; n += benchChunk {
				if _, err := w.Write(out); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		for n := 0; n < benchTotal; n += benchChunk {
			if _, err := io.ReadFull(r, in); err != nil {
				b.Fatal(err)
			}
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
}
