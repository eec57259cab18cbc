package shm

import (
	"encoding/binary"
	"fmt"
)

// Socket frames. After the handshake a pair's socket (SOCK_SEQPACKET: one
// write is one message) carries what must not wait for ring space, each
// frame one message, little endian:
//
//	kind u8, flags u8, 0 u16, code u32, group u64, seq u64, id u64, text
//
// Kinds:
//
//	DATA     the sender published slots or control entries while the
//	         receiver slept (a doorbell)
//	SPACE    the receiver freed the slots a blocked sender waits for
//	CTS      id, flags: a control entry that did not fit the control ring
//	         (0 ctlCTS, 1 ctlCTSSize, 2 ctlDone)
//	RETRACT  id: the sender gave up the message it announced; flags 1:
//	         it was offered by address, answer ctlDone (see cma.go)
//	ABORT    group, seq, id = unix nanoseconds at the origin,
//	         code = transport.CauseCode, text = the cause's text
//	PING     nothing (a heartbeat)
const (
	fData    = 1
	fSpace   = 2
	fCTS     = 3
	fRetract = 4
	fAbort   = 5
	fPing    = 6

	frameHdr = 32
	// maxAbortText bounds the cause text of an ABORT frame.
	maxAbortText = 4096
	maxFrame     = frameHdr + maxAbortText
)

// frame is a socket frame.
type frame struct {
	kind, flags uint8
	code        uint32
	group, seq  uint64
	id          uint64
	text        []byte
}

func (f *frame) bytes() []byte {
	b := make([]byte, frameHdr+len(f.text))
	le := binary.LittleEndian
	b[0], b[1] = f.kind, f.flags
	le.PutUint32(b[4:], f.code)
	le.PutUint64(b[8:], f.group)
	le.PutUint64(b[16:], f.seq)
	le.PutUint64(b[24:], f.id)
	copy(b[frameHdr:], f.text)
	return b
}

// parseFrame decodes one message; text aliases b.
func parseFrame(b []byte) (frame, error) {
	if len(b) < frameHdr {
		return frame{}, fmt.Errorf("frame of %d bytes", len(b))
	}
	le := binary.LittleEndian
	f := frame{kind: b[0], flags: b[1], code: le.Uint32(b[4:]), group: le.Uint64(b[8:]),
		seq: le.Uint64(b[16:]), id: le.Uint64(b[24:]), text: b[frameHdr:]}
	if b[2] != 0 || b[3] != 0 {
		return f, fmt.Errorf("frame with reserved bytes %x", b[2:4])
	}
	if f.kind < fData || f.kind > fPing {
		return f, fmt.Errorf("unknown frame kind %d", f.kind)
	}
	if f.kind != fAbort && len(f.text) > 0 {
		return f, fmt.Errorf("frame kind %d with %d bytes of text", f.kind, len(f.text))
	}
	return f, nil
}
