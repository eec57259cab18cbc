package reduce

import "testing"

func TestOverlap(t *testing.T) {
	b := make([]byte, 64)
	for _, c := range []struct {
		name string
		a, b []byte
		want Sharing
	}{
		{"empty", b[:0], b, Disjoint},
		{"both empty at one address", b[8:8], b[8:8], Disjoint},
		{"adjacent", b[:32], b[32:], Disjoint},
		{"other memory", b, make([]byte, 64), Disjoint},
		{"identical", b[4:36], b[4:36], Identical},
		{"same start, other length", b[:32], b[:16], Partial},
		{"one byte shared", b[:33], b[32:], Partial},
		{"inside", b, b[8:16], Partial},
	} {
		if got := Overlap(c.a, c.b); got != c.want {
			t.Errorf("%s: Overlap = %d, want %d", c.name, got, c.want)
		}
		if got := Overlap(c.b, c.a); got != c.want {
			t.Errorf("%s, swapped: Overlap = %d, want %d", c.name, got, c.want)
		}
	}
}
