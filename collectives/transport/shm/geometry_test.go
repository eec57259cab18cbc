package shm

import "testing"

// The default geometry keeps the full rings for small groups and bounds
// what a host's pairs commit together for large ones.
func TestDefaultGeometry(t *testing.T) {
	for _, n := range []int{1, 2, 8, 16, 24, 64, 256} {
		size, slots := defaultGeometry(n)
		if err := checkGeometry(size, slots); err != nil {
			t.Fatalf("%d ranks: %d slots of %d bytes: %v", n, slots, size, err)
		}
		total := n * (n - 1) * size * slots
		t.Logf("%d ranks: %d slots of %d KiB, %d MiB on the host", n, slots, size>>10, total>>20)
		if n <= 8 && (size != DefaultSlotSize || slots != DefaultSlots) {
			t.Errorf("%d ranks: %d slots of %d bytes, want the defaults", n, slots, size)
		}
		if n <= 64 && total > DefaultHostBytes {
			t.Errorf("%d ranks commit %d MiB, over %d MiB", n, total>>20, DefaultHostBytes>>20)
		}
	}
}
