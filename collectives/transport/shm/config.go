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

// Config is one rank's part of a group of processes of one host: the
// Setup every carrier gets (its Run names each rank's rendezvous socket,
// with Group and Rank, and a rank of another run is refused) and the
// rings' own limits. The lower rank of a pair creates its region with its
// own SlotSize and Slots; EagerMax is capped by the pair's SlotSize.
type Config struct {
	msg.Setup
	// SlotSize is the payload bytes of one ring slot (a multiple of 64),
	// and Slots the slots of each ring (one per direction of a pair).
	// Defaults DefaultSlotSize and DefaultSlots; the variables
	// CHOREO_SHM_SLOT_SIZE and CHOREO_SHM_SLOTS override them.
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
	c.SlotSize = cmp.Or(c.SlotSize, DefaultSlotSize)
	c.Slots = cmp.Or(c.Slots, DefaultSlots)
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
