package shm

import (
	"cmp"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// Defaults of Config's own limits (msg.Setup's are package msg's).
const (
	DefaultSlotSize = 1 << 20 // a ring chunk (algo's DefaultNetChunkBytes) in one slot
	DefaultSlots    = 16

	// Bounds of the ring geometry.
	minSlotSize = 4 << 10
	maxSlotSize = 16 << 20
	minSlots    = 2
	maxSlots    = 1024
	maxRegion   = 1 << 30
)

// DefaultHostBytes bounds the memory that the rings of one host's pairs
// take together under the default geometry: a pair's region is committed
// when it is made (a full memory limit fails there, not as a fault later),
// and n ranks of one host make n(n-1)/2 of them.
const DefaultHostBytes = 2 << 30

// defaultGeometry is the ring geometry for n ranks on one host:
// DefaultSlots slots of DefaultSlotSize while their pairs' rings fit
// DefaultHostBytes; beyond, fewer slots (down to 4), then smaller ones
// (down to 64 KiB), then 2 slots. 8 ranks keep 16 slots of 1 MiB; 64 take
// 4 of 128 KiB.
func defaultGeometry(n int) (slotSize, slots int) {
	rings := max(1, n*(n-1)) // two per pair
	perRing := DefaultHostBytes / rings
	slotSize, slots = DefaultSlotSize, DefaultSlots
	for slotSize*slots > perRing && slots > 4 {
		slots /= 2
	}
	for slotSize*slots > perRing && slotSize > 64<<10 {
		slotSize /= 2
	}
	for slotSize*slots > perRing && slots > minSlots {
		slots /= 2
	}
	return slotSize, slots
}

// hostRanks is how many ranks share this rank's host as far as its
// config tells: itself and the peers it links (every other rank when
// Peers is nil).
func (c Config) hostRanks() int {
	if c.Peers != nil {
		return len(c.Peers) + 1
	}
	return c.Size
}

// Config is one rank's part of a group of processes of one host: the
// Setup every carrier gets (its Run names each rank's rendezvous socket,
// with Group and Rank, and a rank of another run is refused) and the
// rings' own limits. The lower rank of a pair creates its region with its
// own SlotSize and Slots; EagerMax is capped by the pair's SlotSize.
type Config struct {
	msg.Setup
	// SlotSize is the payload bytes of one ring slot (a multiple of 64),
	// and Slots the slots of each ring (one per direction of a pair).
	// Defaults DefaultSlotSize and DefaultSlots, less in groups whose
	// pairs would pass DefaultHostBytes (see defaultGeometry); the
	// variables CHOREO_SHM_SLOT_SIZE and CHOREO_SHM_SLOTS override them.
	SlotSize, Slots int
	// CMAMin is the least message offered to the receiver by address
	// (single copy, see cma.go); smaller ones go through the slots.
	// Negative turns single copy off (this rank neither offers nor
	// reads); zero offers from DefaultCMAMin bytes and reads where that
	// pays (see cmaPays); a positive value reads wherever the host allows.
	// The variable CHOREO_SHM_CMA overrides it ("off", "auto", a count).
	CMAMin  int
	cmaAuto bool // CMAMin was left to the default
}

// normalize checks c and fills in the defaults.
func (c Config) normalize() (Config, error) {
	var err error
	if c.Setup, err = c.Setup.Normalize("shm", maxRegion); err != nil {
		return c, err
	}
	bad := func(format string, a ...any) (Config, error) {
		return c, fmt.Errorf("shm: rank %d: config: %w: %s", c.Rank, transport.ErrBadArgument, fmt.Sprintf(format, a...))
	}
	if err := c.ringFromEnv(); err != nil {
		return bad("%v", err)
	}
	slotSize, slots := defaultGeometry(c.hostRanks())
	c.SlotSize = cmp.Or(c.SlotSize, slotSize)
	c.Slots = cmp.Or(c.Slots, slots)
	if err := checkGeometry(c.SlotSize, c.Slots); err != nil {
		return bad("%v", err)
	}
	if c.CMAMin, err = cmaMinFromEnv(c.CMAMin); err != nil {
		return bad("%v", err)
	}
	if c.CMAMin == 0 {
		c.CMAMin, c.cmaAuto = DefaultCMAMin, true
	}
	return c, nil
}
