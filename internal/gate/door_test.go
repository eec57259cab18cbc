package gate

import (
	"errors"
	"net"
	"testing"
	"time"
)

// A silent connection waits in quiet; once heard it moves to spoken; a
// flood of quiet ones cannot cut it there; once kept, no cut reaches it.
func TestDoorQuietSpokenKeep(t *testing.T) {
	d := &Door{quiet: New(1, time.Nanosecond), spoken: New(1, time.Hour)}
	c1, f1 := pipe(t)
	g1, err := d.Admit(c1, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := g1.Heard(); err != nil {
		t.Fatalf("heard: %v", err)
	}
	for range 3 { // silent strangers churn through quiet only
		c, _ := pipe(t)
		s, err := d.Admit(c, false)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		defer s.Leave()
	}
	if g1.Cut() || !open(f1) {
		t.Fatal("a guest that spoke was cut by silent strangers")
	}
	if !g1.Keep() {
		t.Fatal("keep failed")
	}
	g1.Leave()
	if q, s := d.Stats(); q.Cut != 2 || s.Waiting != 0 {
		t.Fatalf("quiet %+v spoken %+v", q, s)
	}
}

// A quiet guest cut before it is heard fails Heard with ErrCut, which
// counts as turned away for room; a cut guest is not kept.
func TestDoorCutBeforeHeard(t *testing.T) {
	d := &Door{quiet: New(1, time.Nanosecond), spoken: New(1, time.Hour)}
	c1, f1 := pipe(t)
	g1, _ := d.Admit(c1, false)
	time.Sleep(time.Millisecond)
	c2, _ := pipe(t)
	g2, err := d.Admit(c2, false)
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Leave()
	if err := g1.Heard(); !errors.Is(err, ErrCut) || !errors.Is(err, ErrFull) {
		t.Fatalf("heard after a cut: %v, want ErrCut (and ErrFull)", err)
	}
	if !g1.Cut() || g1.Keep() || !closed(f1) {
		t.Fatal("the cut guest is not reported cut and closed")
	}
}

// Peek sees the bytes waiting on a socket without reading them, waits for
// the rest until its deadline, and stops early when told to.
func TestPeek(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	dc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dc.Close() }()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sc.Close() }()
	var b [4]byte
	if n := Peek(sc, b[:], time.Time{}, nil); n != 0 {
		t.Fatalf("nothing sent: peeked %d", n)
	}
	_, _ = dc.Write([]byte{1, 2})
	go func() { time.Sleep(20 * time.Millisecond); _, _ = dc.Write([]byte{3, 4}) }()
	if n := Peek(sc, b[:], time.Now().Add(10*time.Second), nil); n != 4 || b != [4]byte{1, 2, 3, 4} {
		t.Fatalf("peeked %d: %v", n, b)
	}
	if n := Peek(sc, b[:], time.Now().Add(10*time.Second), func(in []byte) bool { return in[0] == 9 }); n != 4 {
		t.Fatalf("peeked %d again", n) // all in: no wait, whatever more says
	}
	got := make([]byte, 4)
	_ = sc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := sc.Read(got); err != nil || got[0] != 1 {
		t.Fatalf("the peeked bytes were consumed: %v %v", got, err)
	}
}
