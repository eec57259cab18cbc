package transport_test

import (
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// TestRetiredForgetsOldest: a Retired remembers the last RetireMemory
// groups, forgets older ones first, and Add reports only a new group.
func TestRetiredForgetsOldest(t *testing.T) {
	var r transport.Retired
	if r.Has(1) {
		t.Fatal("an empty Retired has group 1")
	}
	const n = 3 * transport.RetireMemory
	for g := uint64(1); g <= n; g++ {
		if !r.Add(g) {
			t.Fatalf("group %d added twice", g)
		}
	}
	if r.Add(n) {
		t.Fatal("Add of a retired group reported it new")
	}
	if r.Len() != transport.RetireMemory {
		t.Fatalf("remembers %d groups, want %d", r.Len(), transport.RetireMemory)
	}
	for g := uint64(1); g <= n; g++ {
		if want := g > n-transport.RetireMemory; r.Has(g) != want {
			t.Fatalf("group %d retired: %v, want %v", g, r.Has(g), want)
		}
	}
}

// BenchmarkRetiredHas is the cost of the check every call and arrival
// makes: with no group retired, and with many (a group not among them).
func BenchmarkRetiredHas(b *testing.B) {
	var none, many transport.Retired
	for g := range uint64(transport.RetireMemory) {
		many.Add(g + 1000)
	}
	for _, c := range []struct {
		name string
		r    *transport.Retired
	}{{"none", &none}, {"many", &many}} {
		b.Run(c.name, func(b *testing.B) {
			for i := range b.N {
				if c.r.Has(uint64(i & 7)) {
					b.Fatal("retired")
				}
			}
		})
	}
}
