package mesh

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

const (
	protoVersion = 1
	// hsSize is every handshake message's size: fixed, so that a message
	// is read whole on a stream and a packet socket alike.
	hsSize   = 192
	helloOff = 74
	// MaxHello bounds Config.Hello and MaxLabel Config.Label.
	MaxHello = hsSize - helloOff
	MaxLabel = 8
)

var hsMagic = [4]byte{'C', 'H', 'M', 'S'}

// Handshake message kinds, in the order they are sent.
const (
	hsHello     = 1 // dialer -> acceptor
	hsChallenge = 2 // acceptor -> dialer
	hsProof     = 3 // dialer -> acceptor
	hsVerdict   = 4 // acceptor -> dialer
)

// hsMsg is one handshake message. Hello and challenge carry the sender's
// view (From is the sender), a fresh nonce and the sender's payload;
// proof and verdict carry a MAC in Nonce and zeros elsewhere but for the
// version, the kind and the status.
//
// Layout (big endian): magic "CHMS" [0:4], version u16 [4:6], kind u8 [6],
// status u8 [7], group u64 [8:16], from u32 [16:20], to u32 [20:24],
// size u32 [24:28], connection index u16 [28:30], connections u16 [30:32],
// label [32:40] (zero padded), nonce or MAC [40:72], payload length u16
// [72:74], payload [74:192] (zero padded).
type hsMsg struct {
	Version        uint16
	Kind, Status   uint8
	Group          uint64
	From, To, Size uint32
	Conn, Conns    uint16
	Label          [MaxLabel]byte
	Nonce          [32]byte
	Hello          []byte
}

func (m *hsMsg) encode() []byte {
	b := make([]byte, hsSize)
	be := binary.BigEndian
	copy(b[0:4], hsMagic[:])
	be.PutUint16(b[4:], m.Version)
	b[6], b[7] = m.Kind, m.Status
	be.PutUint64(b[8:], m.Group)
	be.PutUint32(b[16:], m.From)
	be.PutUint32(b[20:], m.To)
	be.PutUint32(b[24:], m.Size)
	be.PutUint16(b[28:], m.Conn)
	be.PutUint16(b[30:], m.Conns)
	copy(b[32:40], m.Label[:])
	copy(b[40:72], m.Nonce[:])
	be.PutUint16(b[72:], uint16(len(m.Hello)))
	copy(b[helloOff:], m.Hello)
	return b
}

// decodeHS parses a handshake message. It checks the length, the magic,
// the kind, the status and the payload's length and padding; the fields'
// meaning is the caller's to check. What it accepts encodes back to b.
func decodeHS(b []byte) (hsMsg, error) {
	var m hsMsg
	if len(b) != hsSize {
		return m, fmt.Errorf("%w: %d bytes", ErrHandshake, len(b))
	}
	if [4]byte(b[0:4]) != hsMagic {
		return m, fmt.Errorf("%w: not a choreo mesh peer (magic %q)", ErrHandshake, b[0:4])
	}
	be := binary.BigEndian
	m = hsMsg{Version: be.Uint16(b[4:]), Kind: b[6], Status: b[7], Group: be.Uint64(b[8:]),
		From: be.Uint32(b[16:]), To: be.Uint32(b[20:]), Size: be.Uint32(b[24:]),
		Conn: be.Uint16(b[28:]), Conns: be.Uint16(b[30:]),
		Label: [MaxLabel]byte(b[32:40]), Nonce: [32]byte(b[40:72])}
	n := int(be.Uint16(b[72:]))
	switch {
	case m.Kind < hsHello || m.Kind > hsVerdict:
		return m, fmt.Errorf("%w: kind %d", ErrHandshake, m.Kind)
	case int(m.Status) >= len(statusErr):
		return m, fmt.Errorf("%w: status %d", ErrHandshake, m.Status)
	case n > MaxHello:
		return m, fmt.Errorf("%w: a payload of %d bytes", ErrHandshake, n)
	}
	for _, c := range b[helloOff+n:] {
		if c != 0 {
			return m, fmt.Errorf("%w: bytes after the payload", ErrHandshake)
		}
	}
	if n > 0 {
		m.Hello = append([]byte(nil), b[helloOff:helloOff+n]...)
	}
	return m, nil
}

func labelOf(s string) [MaxLabel]byte {
	var l [MaxLabel]byte
	copy(l[:], s)
	return l
}

// handshakeMAC is HMAC-SHA256(secret, "choreo/mesh/v1 <label> <role>
// proof" || hello || challenge): both nonces, both ranks, the group and
// both payloads, as sent. The role makes the two sides' proofs differ, so
// one can never be replayed as the other; the label makes a proof for one
// kind of link no proof for another.
func handshakeMAC(secret []byte, label, role string, hello, challenge []byte) [32]byte {
	h := hmac.New(sha256.New, secret)
	fmt.Fprintf(h, "choreo/mesh/v1 %s %s proof", label, role)
	h.Write(hello)
	h.Write(challenge)
	return [32]byte(h.Sum(nil))
}

const (
	roleDialer   = "dialer"
	roleAcceptor = "acceptor"
)
