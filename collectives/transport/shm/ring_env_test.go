package shm

import (
	"errors"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// CHOREO_SHM_SLOT_SIZE and CHOREO_SHM_SLOTS override the ring's geometry,
// and bad values are refused as bad arguments.
func TestRingFromEnv(t *testing.T) {
	for _, c := range []struct {
		size, slots string
		wantSize    int
		wantSlots   int
		bad         bool
	}{
		{"", "", DefaultSlotSize, DefaultSlots, false},
		{"1M", "32", 1 << 20, 32, false},
		{"512KiB", "", 512 << 10, DefaultSlots, false},
		{"65536", "4", 64 << 10, 4, false},
		{"64kb", "", 64 << 10, DefaultSlots, false},
		{"lots", "", 0, 0, true},
		{"", "-3", 0, 0, true},
		{"100", "", 0, 0, true},            // not a multiple of 64, under the least
		{"16M", "1024", 0, 0, true},        // region over the bound
		{"", "1", 0, 0, true},              // under minSlots
		{"9999999999999M", "", 0, 0, true}, // overflow
	} {
		t.Setenv(envSlotSize, c.size)
		t.Setenv(envSlots, c.slots)
		got, err := Config{Setup: msg.Setup{Rank: 0, Size: 2, Secret: testSecret}}.normalize()
		if c.bad {
			if !errors.Is(err, transport.ErrBadArgument) {
				t.Errorf("%q, %q: %v, want a bad argument", c.size, c.slots, err)
			}
			continue
		}
		if err != nil || got.SlotSize != c.wantSize || got.Slots != c.wantSlots {
			t.Errorf("%q, %q: %d slots of %d, %v; want %d of %d", c.size, c.slots, got.Slots, got.SlotSize, err, c.wantSlots, c.wantSize)
		}
	}
}
