package shm

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Region layout. A pair's region is one shared mapping: a header, then two
// lanes, lane 0 carrying the lower rank's messages to the higher and lane 1
// the other way. Offsets are fixed by SlotSize and Slots, which the header
// records; every number is little endian.
//
//	header   [0, regionHdr)   magic "CHOREOSM", version u32, slot size u32,
//	                          slots u32, ctl entries u32, group u64,
//	                          low rank u32, high rank u32
//	lane 0   [regionHdr, regionHdr+laneSize)
//	lane 1   [regionHdr+laneSize, regionHdr+2*laneSize)
//
// A lane: words each on a cache line of its own (written by one side, so
// the sides do not fight over lines), the control ring, the slots.
//
//	+0    head      u64  producer: slots published
//	+128  tail      u64  consumer: slots consumed
//	+256  ctlHead   u64  producer: control entries published
//	+384  ctlTail   u64  consumer: control entries consumed
//	+512  sleep     u32  consumer: 1 while it is about to block
//	+640  waitTail  u64  producer: the tail a blocked sender waits for, 0 none
//	+768  freed     u64  consumer: eager window bytes handed back
//	+896  polling   u32  consumer: calls polling the lane (no doorbell needed)
//	+1024 control entries, ctlEntries x 16 bytes: kind u32, 0 u32, id u64
//	then  slots, Slots x (slotHdr + SlotSize): a slot header, the payload
const (
	regionHdr  = 256
	laneHdr    = 1024
	ctlEntry   = 16
	ctlEntries = 1024
	slotHdr    = 64

	offHead     = 0
	offTail     = 128
	offCtlHead  = 256
	offCtlTail  = 384
	offSleep    = 512
	offWaitTail = 640
	offFreed    = 768
	offPolling  = 896

	regionVersion = 3 // of the layout above; a region of another is refused
)

var regionMagic = [8]byte{'C', 'H', 'O', 'R', 'E', 'O', 'S', 'M'}

func laneSize(slotSize, slots int) int {
	return laneHdr + ctlEntries*ctlEntry + slots*(slotHdr+slotSize)
}

// regionSize is the bytes of a region, rounded up to whole pages.
func regionSize(slotSize, slots int) int {
	n := regionHdr + 2*laneSize(slotSize, slots)
	return (n + 4095) &^ 4095
}

func checkGeometry(slotSize, slots int) error {
	if slotSize < minSlotSize || slotSize > maxSlotSize || slotSize%64 != 0 || slots < minSlots || slots > maxSlots ||
		regionSize(slotSize, slots) > maxRegion {
		return fmt.Errorf("%d slots of %d bytes: want [%d, %d] slots of a multiple of 64 in [%d, %d] bytes, in %d bytes at most",
			slots, slotSize, minSlots, maxSlots, minSlotSize, maxSlotSize, maxRegion)
	}
	return nil
}

// geometry is what a region's header says of its layout.
type geometry struct {
	slotSize, slots int
	group           uint64
	low, high       int
}

func writeHeader(mem []byte, g geometry) {
	copy(mem[0:8], regionMagic[:])
	le := binary.LittleEndian
	le.PutUint32(mem[8:], regionVersion)
	le.PutUint32(mem[12:], uint32(g.slotSize))
	le.PutUint32(mem[16:], uint32(g.slots))
	le.PutUint32(mem[20:], ctlEntries)
	le.PutUint64(mem[24:], g.group)
	le.PutUint32(mem[32:], uint32(g.low))
	le.PutUint32(mem[36:], uint32(g.high))
}

// readHeader checks a mapped region's header against the pair, the group
// and the mapping's size, and returns its geometry.
func readHeader(mem []byte, group uint64, low, high int) (geometry, error) {
	if len(mem) < regionHdr || [8]byte(mem[0:8]) != regionMagic {
		return geometry{}, fmt.Errorf("not a choreo region")
	}
	le := binary.LittleEndian
	g := geometry{slotSize: int(le.Uint32(mem[12:])), slots: int(le.Uint32(mem[16:])),
		group: le.Uint64(mem[24:]), low: int(le.Uint32(mem[32:])), high: int(le.Uint32(mem[36:]))}
	switch {
	case le.Uint32(mem[8:]) != regionVersion:
		return g, fmt.Errorf("region version %d, want %d", le.Uint32(mem[8:]), regionVersion)
	case le.Uint32(mem[20:]) != ctlEntries:
		return g, fmt.Errorf("%d control entries, want %d", le.Uint32(mem[20:]), ctlEntries)
	case checkGeometry(g.slotSize, g.slots) != nil:
		return g, checkGeometry(g.slotSize, g.slots)
	case regionSize(g.slotSize, g.slots) != len(mem):
		return g, fmt.Errorf("region of %d bytes, its header says %d", len(mem), regionSize(g.slotSize, g.slots))
	case g.group != group || g.low != low || g.high != high:
		return g, fmt.Errorf("region of group %d ranks %d-%d, want group %d ranks %d-%d", g.group, g.low, g.high, group, low, high)
	}
	return g, nil
}

// lane is one direction of a pair: a view of its part of the mapping.
// Every shared word is read and written atomically (the hardware's atomics
// order processes as they order goroutines); a slot's bytes are published
// by the store of head that follows them and released by that of tail.
type lane struct {
	mem      []byte
	slotSize int
	slots    int

	head, tail, ctlHead, ctlTail, waitTail, freed *atomic.Uint64
	sleep, polling                                *atomic.Uint32
}

func laneAt(mem []byte, g geometry, k int) *lane {
	size := laneSize(g.slotSize, g.slots)
	off := regionHdr + k*size
	b := mem[off : off+size : off+size]
	u64 := func(o int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[o])) }
	return &lane{
		mem: b, slotSize: g.slotSize, slots: g.slots,
		head: u64(offHead), tail: u64(offTail), ctlHead: u64(offCtlHead), ctlTail: u64(offCtlTail),
		waitTail: u64(offWaitTail), freed: u64(offFreed),
		sleep:   (*atomic.Uint32)(unsafe.Pointer(&b[offSleep])),
		polling: (*atomic.Uint32)(unsafe.Pointer(&b[offPolling])),
	}
}

func (l *lane) slot(i uint64) []byte {
	stride := slotHdr + l.slotSize
	off := laneHdr + ctlEntries*ctlEntry + int(i%uint64(l.slots))*stride
	return l.mem[off : off+stride : off+stride]
}

func (l *lane) ctl(i uint64) []byte {
	off := laneHdr + int(i%ctlEntries)*ctlEntry
	return l.mem[off : off+ctlEntry : off+ctlEntry]
}
