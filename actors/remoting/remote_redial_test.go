package remoting

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// breakingListener cuts the first cuts connections after reading the
// client's first bytes, as a loaded server past its handshake bound does,
// and serves srv's handshake on the rest. After the cuts, when gone is
// set, it closes its listener instead (the process is gone).
func breakingListener(t *testing.T, srv side, cuts int, gone bool) (string, chan serverResult) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan serverResult, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			if n < cuts {
				_ = raw.SetReadDeadline(time.Now().Add(testBound))
				_, _ = raw.Read(make([]byte, hsClientFixed))
				_ = raw.Close()
				if n == cuts-1 && gone {
					_ = ln.Close()
					return
				}
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, info, err := srv.c.ServerHandshake(raw)
				if err != nil {
					_ = raw.Close()
				}
				res <- serverResult{c, info, err}
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return ln.Addr().String(), res
}

// A live server that breaks off handshakes (a loaded one past its bound)
// is dialled again, not refused: the client connects on a later try.
func TestHandshakeBrokenOffIsDialledAgain(t *testing.T) {
	leakCheck(t)
	srv, cli := newSide(groupSecret, "server:1", time.Minute), newSide(groupSecret, "127.0.0.1:4242", time.Minute)
	addr, res := breakingListener(t, srv, 3, false)
	cc, _, err := dialHandshake(t, cli, addr)
	if err != nil {
		t.Fatalf("a live server that broke off 3 handshakes: %v", err)
	}
	r := serverDone(t, res)
	if r.err != nil {
		t.Fatalf("server: %v", r.err)
	}
	if _, err := cc.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r.conn, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	if lastAuth(cli.c) != nil {
		t.Fatalf("a broken-off handshake counted as an authentication failure: %v", lastAuth(cli.c))
	}
	_ = cc.Close()
	_ = r.conn.Close()
}

// A server whose process is gone after it broke off a handshake fails the
// client at the refused redial, not after its dial bound.
func TestHandshakeBrokenOffThenRefusedFails(t *testing.T) {
	leakCheck(t)
	srv, cli := newSide(groupSecret, "server:1", time.Minute), newSide(groupSecret, "127.0.0.1:4242", time.Minute)
	addr, _ := breakingListener(t, srv, 1, true)
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	raw, err := net.DialTimeout("tcp", addr, testBound)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = cli.c.ClientHandshake(ctx, addr, raw)
	if !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, ErrAuth) {
		t.Fatalf("handshake with a server gone: %v, want the refused redial", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the client waited out its bound instead of failing at the refused redial")
	}
}
