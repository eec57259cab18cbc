package gate

import (
	"errors"
	"net"
	"testing"
	"time"
)

// pipe is one end of an in-memory connection; the other end tells when
// the gate closed it.
func pipe(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}

// closed reports whether c's far end was closed (a read fails at once
// other than by its deadline).
func closed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

// open reports whether c's far end is still open (a short read times out).
func open(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestAdmitCutsTheOldestWhenFull(t *testing.T) {
	g := New(2, time.Nanosecond)
	var far [3]net.Conn
	var pass [3]*Pass
	for i := range 3 {
		c, f := pipe(t)
		far[i] = f
		p, err := g.Admit(c)
		if err != nil {
			t.Fatalf("admit %d: %v", i, err)
		}
		pass[i] = p
		time.Sleep(time.Millisecond)
	}
	if !closed(far[0]) || !open(far[1]) || !open(far[2]) {
		t.Fatal("want only the oldest handshake's connection closed")
	}
	if s := g.Stats(); s.Waiting != 2 || s.Cut != 1 || s.Refused != 0 {
		t.Fatalf("stats %+v, want 2 waiting, 1 cut", s)
	}
	pass[0].Done() // already cut: nothing more
	pass[1].Done()
	pass[1].Done()
	if s := g.Stats(); s.Waiting != 1 {
		t.Fatalf("%d waiting after Done, want 1", s.Waiting)
	}
	pass[2].Done()
}

func TestAdmitRefusesWhileEveryHandshakeIsYoung(t *testing.T) {
	g := New(1, time.Hour)
	c1, f1 := pipe(t)
	p, err := g.Admit(c1)
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := pipe(t)
	if _, err := g.Admit(c2); !errors.Is(err, ErrFull) {
		t.Fatalf("second admit: %v, want ErrFull", err)
	}
	if !open(f1) {
		t.Fatal("the young handshake's connection was closed")
	}
	p.Done()
	c3, _ := pipe(t)
	p3, err := g.Admit(c3)
	if err != nil {
		t.Fatalf("admit after Done: %v", err)
	}
	p3.Done()
	if s := g.Stats(); s.Refused != 1 || s.Cut != 0 || s.Waiting != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestNewDefaults(t *testing.T) {
	g := New(0, 0)
	if g.slots != DefaultSlots || g.minAge != DefaultMinAge {
		t.Fatalf("slots %d minAge %v", g.slots, g.minAge)
	}
}
