package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sizes on the wire.
const (
	hdrSize = 48 // every frame header

	// maxAbortText bounds the cause text of an ABORT frame.
	maxAbortText = 4096
	// minFrame and maxFrameLimit bound Config.MaxFrame.
	minFrame      = maxAbortText
	maxFrameLimit = 1 << 30
)

// Frame types.
const (
	fEager   = 1 // tag, Len = message size; payload: the message
	fRTS     = 2 // tag, ID, Size = message size: a message waits for its Recv
	fCTS     = 3 // ID, Flags = ctsOK, ctsSize or ctsDone: the answer to an RTS
	fChunk   = 4 // ID, Size = offset, Len: a piece of a message after its CTS
	fRetract = 5 // ID, Flags = retractAck or 0: the sender gave the message up (or does not know the ID)
	fCredit  = 6 // Size = window bytes handed back to the sender
	fAbort   = 7 // Group, Seq, Origin, ID = unix nanos, Size = cause code; payload: cause text
	fPing    = 8 // nothing: the sender is alive
	fMax     = fPing
)

// CTS flags (msg.Answer).
const (
	ctsOK   = 0 // the Recv is posted: send the chunks
	ctsSize = 1 // the receive buffer's size differs: the message is consumed
	ctsDone = 2 // nothing of the message is read any more (after a retractAck)
)

// retractAck is the RETRACT flag that asks for a CTS ctsDone.
const retractAck = 1

// frame is a frame header.
//
// Layout (big endian): type u8 [0], flags u8 [1], reserved u16 [2:4] (0),
// payload length u32 [4:8], group u64 [8:16], seq u64 [16:24],
// step u32 [24:28], origin u32 [28:32], id u64 [32:40], size u64 [40:48].
type frame struct {
	Type, Flags uint8
	Len         uint32
	Group, Seq  uint64
	Step        uint32
	Origin      uint32
	ID          uint64
	Size        uint64
}

var errFrame = errors.New("bad frame")

func putFrame(b []byte, f *frame) {
	_ = b[hdrSize-1]
	f.walk(&fields{b: b})
}

func (f *frame) bytes() []byte {
	b := make([]byte, hdrSize)
	putFrame(b, f)
	return b
}

// walk puts f into c or gets it from c, at the offsets of the layout (see
// frame); putting writes the reserved bytes as zeros, getting leaves them
// to decodeFrame's check.
func (f *frame) walk(c *fields) {
	c.u8(0, &f.Type)
	c.u8(1, &f.Flags)
	c.reserved(2, 2)
	c.u32(4, &f.Len)
	c.u64(8, &f.Group)
	c.u64(16, &f.Seq)
	c.u32(24, &f.Step)
	c.u32(28, &f.Origin)
	c.u64(32, &f.ID)
	c.u64(40, &f.Size)
}

// decodeFrame parses and checks a frame header: a known type, reserved
// bytes zero, a payload length within maxFrame and allowed for the type
// (types without a payload must declare none; an abort's text is at most
// maxAbortText; a chunk is not empty), flags only where the type has them.
// Nothing is allocated: a declared length over the limit is an error, not
// a buffer.
func decodeFrame(b []byte, maxFrame int) (frame, error) {
	var f frame
	if len(b) < hdrSize {
		return f, fmt.Errorf("%w: %d header bytes", errFrame, len(b))
	}
	f.walk(&fields{b: b, get: true})
	if f.Type == 0 || f.Type > fMax {
		return f, fmt.Errorf("%w: type %d", errFrame, f.Type)
	}
	if b[2] != 0 || b[3] != 0 {
		return f, fmt.Errorf("%w: reserved bytes set", errFrame)
	}
	if uint64(f.Len) > uint64(maxFrame) {
		return f, fmt.Errorf("%w: length %d over the limit %d", errFrame, f.Len, maxFrame)
	}
	switch f.Type {
	case fEager:
	case fChunk:
		if f.Len == 0 {
			return f, fmt.Errorf("%w: empty chunk", errFrame)
		}
	case fAbort:
		if f.Len > maxAbortText {
			return f, fmt.Errorf("%w: abort text of %d bytes", errFrame, f.Len)
		}
	default:
		if f.Len != 0 {
			return f, fmt.Errorf("%w: type %d with a %d-byte payload", errFrame, f.Type, f.Len)
		}
	}
	if f.Flags != 0 && !(f.Type == fCTS && f.Flags <= ctsDone) && !(f.Type == fRetract && f.Flags == retractAck) {
		return f, fmt.Errorf("%w: type %d with flags %#x", errFrame, f.Type, f.Flags)
	}
	return f, nil
}

// fields puts the fields of a fixed big-endian layout into b, each at its
// offset, or, with get, gets them from b. A message's walk method names its
// fields once, with their offsets, for both directions.
type fields struct {
	b   []byte
	get bool
}

func (c *fields) u8(off int, v *uint8) {
	if c.get {
		*v = c.b[off]
	} else {
		c.b[off] = *v
	}
}

func (c *fields) u16(off int, v *uint16) {
	if c.get {
		*v = binary.BigEndian.Uint16(c.b[off:])
	} else {
		binary.BigEndian.PutUint16(c.b[off:], *v)
	}
}

func (c *fields) u32(off int, v *uint32) {
	if c.get {
		*v = binary.BigEndian.Uint32(c.b[off:])
	} else {
		binary.BigEndian.PutUint32(c.b[off:], *v)
	}
}

func (c *fields) u64(off int, v *uint64) {
	if c.get {
		*v = binary.BigEndian.Uint64(c.b[off:])
	} else {
		binary.BigEndian.PutUint64(c.b[off:], *v)
	}
}

func (c *fields) bytes(off int, v []byte) {
	if c.get {
		copy(v, c.b[off:])
	} else {
		copy(c.b[off:], v)
	}
}

// reserved is n bytes at off that carry nothing: put as zeros, left alone
// on get (the decoder checks them).
func (c *fields) reserved(off, n int) {
	if !c.get {
		clear(c.b[off : off+n])
	}
}
