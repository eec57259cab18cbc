package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/transport/msg"
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
	fCTS     = 3 // ID, Flags = the msg.Answer to an RTS
	fChunk   = 4 // ID, Size = offset, Len: a piece of a message after its CTS
	fRetract = 5 // ID, Flags = retractAck or 0: the sender gave the message up (or does not know the ID)
	fCredit  = 6 // Size = window bytes handed back to the sender
	fAbort   = 7 // Group, Seq, Origin, ID = unix nanos, Size = cause code; payload: cause text
	fPing    = 8 // nothing: the sender is alive
	fMax     = fPing
)

// CTS flags: msg.Answer's values (Go, SizeMismatch, Done).
const ctsDone = uint8(msg.Done)

// retractAck is the RETRACT flag that asks for a CTS ctsDone.
const retractAck = 1

// frame is a frame header; the types above say what each one carries.
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
	be := binary.BigEndian
	_ = b[hdrSize-1]
	b[0], b[1], b[2], b[3] = f.Type, f.Flags, 0, 0
	be.PutUint32(b[4:], f.Len)
	be.PutUint64(b[8:], f.Group)
	be.PutUint64(b[16:], f.Seq)
	be.PutUint32(b[24:], f.Step)
	be.PutUint32(b[28:], f.Origin)
	be.PutUint64(b[32:], f.ID)
	be.PutUint64(b[40:], f.Size)
}

func (f *frame) bytes() []byte {
	b := make([]byte, hdrSize)
	putFrame(b, f)
	return b
}

// getFrame reads a header's fields, unchecked (see decodeFrame).
func getFrame(b []byte) frame {
	be := binary.BigEndian
	return frame{Type: b[0], Flags: b[1], Len: be.Uint32(b[4:]), Group: be.Uint64(b[8:]), Seq: be.Uint64(b[16:]),
		Step: be.Uint32(b[24:]), Origin: be.Uint32(b[28:]), ID: be.Uint64(b[32:]), Size: be.Uint64(b[40:])}
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
	f = getFrame(b)
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
