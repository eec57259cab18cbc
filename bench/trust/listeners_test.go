package main

import (
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// TestListenersFindsOwnSockets: a TCP listener and an abstract unixpacket
// listener of this process are found from its descriptors, the latter
// also by name; a connected socket is not a listener.
func TestListenersFindsOwnSockets(t *testing.T) {
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tl.Close() }()
	name := "@choreo-trust-test/" + rig.RandomHex(8)
	ul, err := net.Listen("unixpacket", name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ul.Close() }()
	c, err := net.Dial("tcp", tl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()

	ts, err := listeners(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []target{{"tcp", tl.Addr().String()}, {"unixpacket", name}} {
		if !slices.Contains(ts, want) {
			t.Errorf("listeners: %v missing from %v", want, ts)
		}
	}
	if slices.Contains(ts, target{"tcp", c.LocalAddr().String()}) {
		t.Errorf("listeners: the connected socket %v is listed", c.LocalAddr())
	}
	named, err := unixNamed("@choreo-trust-test/")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(named, target{"unixpacket", name}) {
		t.Errorf("unixNamed: %s missing from %v", name, named)
	}
}

// TestProcAddr: /proc/net/tcp's little-endian words, IPv4 and IPv6, the
// unspecified address as loopback.
func TestProcAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"00000000:0050":                         "127.0.0.1:80",
		"00000000000000000000000001000000:0050": "[::1]:80",
	} {
		got, err := procAddr(in)
		if err != nil || got != want {
			t.Errorf("procAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := procAddr("zz:1"); err == nil {
		t.Error("procAddr accepted a bad address")
	}
}

// TestFlooderRedials: against a listener that closes every connection at
// once, the flooder keeps redialling, and stop ends its loops.
func TestFlooderRedials(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	f := newFlooder(4)
	f.add(target{"tcp", l.Addr().String()})
	f.add(target{"tcp", l.Addr().String()}) // once only
	deadline := time.Now().Add(30 * time.Second)
	for f.closed.Load() < 20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.stop()
	if got := f.closed.Load(); got < 20 {
		t.Fatalf("%d connections closed and redialled in 30 s, want >= 20", got)
	}
	if n := len(f.flooded()); n != 1 {
		t.Fatalf("%d targets flooded, want 1", n)
	}
}

// TestUsageOfSelf: this process has resident memory and descriptors; a
// process that does not exist reads as -1.
func TestUsageOfSelf(t *testing.T) {
	u := usageOf(os.Getpid())
	if u.rss <= 0 || u.fds <= 0 {
		t.Fatalf("usageOf(self) = %+v", u)
	}
	if u := usageOf(1 << 30); u.rss != -1 || u.fds != -1 {
		t.Fatalf("usageOf(no such pid) = %+v", u)
	}
}
