package shm

import (
	"encoding/binary"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Slot kinds: what a data slot carries.
const (
	slotEager = 1 // tag, size = len: a whole message
	slotRTS   = 2 // tag, id, size: a message waits for its Recv
	slotChunk = 3 // id, off, len: the next bytes of a message whose Recv is posted (size unused)
	// slotRTSCMA is an RTS offering the message by address (off: the
	// address of its bytes in the sender's process; see cma.go).
	slotRTSCMA = 4
)

// Control entry kinds (the control ring, receiver to sender).
const (
	ctlCTS     = 1 // id: the Recv is posted, send the chunks
	ctlCTSSize = 2 // id: the Recv's buffer has another size; do not send
	ctlDone    = 3 // id: the message offered by address was read (or dropped unread)
)

// slotHeader is a data slot's header. Layout (little endian, 56 of the 64
// bytes): kind u32, len u32, group u64, seq u64, step u32, 0 u32, id u64,
// size u64, off u64.
type slotHeader struct {
	kind, len uint32
	tag       transport.Tag
	id        uint64
	size      uint64
	off       uint64
}

func (h *slotHeader) put(b []byte) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], h.kind)
	le.PutUint32(b[4:], h.len)
	le.PutUint64(b[8:], h.tag.Group)
	le.PutUint64(b[16:], h.tag.Seq)
	le.PutUint32(b[24:], h.tag.Step)
	le.PutUint32(b[28:], 0)
	le.PutUint64(b[32:], h.id)
	le.PutUint64(b[40:], h.size)
	le.PutUint64(b[48:], h.off)
}

// getSlotHeader reads a slot header. It copies the bytes first: the peer
// could change them while they are read, and what is checked must be what
// is used.
func getSlotHeader(b []byte) slotHeader {
	var c [56]byte
	copy(c[:], b)
	le := binary.LittleEndian
	return slotHeader{
		kind: le.Uint32(c[0:]), len: le.Uint32(c[4:]),
		tag: transport.Tag{Group: le.Uint64(c[8:]), Seq: le.Uint64(c[16:]), Step: le.Uint32(c[24:])},
		id:  le.Uint64(c[32:]), size: le.Uint64(c[40:]), off: le.Uint64(c[48:]),
	}
}

func putCtl(b []byte, kind uint32, id uint64) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], kind)
	le.PutUint32(b[4:], 0)
	le.PutUint64(b[8:], id)
}

func getCtl(b []byte) (kind uint32, id uint64) {
	var c [ctlEntry]byte
	copy(c[:], b)
	le := binary.LittleEndian
	return le.Uint32(c[0:]), le.Uint64(c[8:])
}
