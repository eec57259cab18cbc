package pool

import "testing"

func TestClass(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 1}, {2, 2}, {3, 4}, {4096, 4096}, {4097, 8192}, {1<<30 + 1, 1 << 31}} {
		if got := Class(c.n); got != c.want {
			t.Errorf("Class(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestLists(t *testing.T) {
	var l Lists[int, string]
	if _, ok := l.Take(8); ok || l.Bytes() != 0 || l.Len(8) != 0 {
		t.Fatal("the zero Lists is not empty")
	}
	l.Put(8, "a", 8)
	l.Put(8, "b", 8)
	l.Put(16, "c", 16)
	if l.Len(8) != 2 || l.Bytes() != 32 {
		t.Fatalf("Len(8) %d, Bytes %d; want 2, 32", l.Len(8), l.Bytes())
	}
	if b, ok := l.Take(8); !ok || b != "b" || l.Bytes() != 24 {
		t.Fatalf("Take(8) = %q, %v (Bytes %d); want the last put, b, and 24", b, ok, l.Bytes())
	}
	n := 0
	for k, b := range l.All() {
		if (k == 8) != (b == "a") || (k == 16) != (b == "c") {
			t.Errorf("All yielded %q under %d", b, k)
		}
		n++
	}
	if n != 2 {
		t.Errorf("All yielded %d blocks, want 2", n)
	}
	l.Clear()
	if _, ok := l.Take(16); ok || l.Bytes() != 0 {
		t.Fatal("Clear kept blocks")
	}
}
