package shm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// protoVersion is the protocol's version, carried by every handshake
// message; a peer speaking another version is refused.
const protoVersion = 2

// The handshake: five fixed 88-byte messages on the pair's socket, the
// higher rank dialing the lower one's rendezvous socket (little endian):
//
//		magic "CHSM" [0:4], version u16 [4:6], kind u8 [6], status u8 [7],
//		group u64 [8:16], from u32 [16:20], to u32 [20:24], size u32 [24:28],
//		window u32 [28:32], slot size u32 [32:36], slots u32 [36:40],
//		run hash [40:48], nonce or MAC [48:80], probe u64 [80:88]
//
//	 1. hello (dialer): its view of the group, the address of its
//	    cross-memory probe word (0: single copy off; see cma.go) and a
//	    fresh nonce.
//	 2. challenge (acceptor): its view, the ring geometry it will create,
//	    its probe word's address and a fresh nonce; or a refusal status and the close.
//	 3. proof (dialer): HMAC-SHA256(secret, "choreo/shm/v1 dialer proof" ||
//	    hello || challenge).
//	 4. verdict (acceptor): when the proof holds, HMAC-SHA256(secret,
//	    "choreo/shm/v1 acceptor proof" || hello || challenge) and, as
//	    SCM_RIGHTS, the descriptor of the region it just created; else a
//	    refusal.
//	 5. ready (dialer): the region is checked and mapped, or a refusal.
//
// Both nonces are in every MAC, so a recorded handshake replays to
// nothing; no region exists before the dialer proved the secret, and the
// dialer maps nothing before the acceptor proved it.
const hsSize = 88

var hsMagic = [4]byte{'C', 'H', 'S', 'M'}

// Handshake message kinds, in the order they are sent.
const (
	hsHello     = 1
	hsChallenge = 2
	hsProof     = 3
	hsVerdict   = 4
	hsReady     = 5
)

// Handshake statuses.
const (
	stOK        = 0
	stVersion   = 1 // unknown protocol version
	stGroup     = 2 // another group id or run: a rank of another run
	stRank      = 3 // the ranks do not fit
	stConfig    = 4 // size or limits disagree
	stMAC       = 5 // the proof does not match the secret
	stDuplicate = 6 // that pair is connected already
	stRegion    = 7 // the region could not be made or used
	stMax       = stRegion
)

var statusText = [...]string{
	stOK:        "ok",
	stVersion:   "protocol version mismatch",
	stGroup:     "group or run mismatch",
	stRank:      "rank mismatch",
	stConfig:    "configuration mismatch",
	stMAC:       "authentication failed",
	stDuplicate: "duplicate connection",
	stRegion:    "shared region failed",
}

// hsMsg is one handshake message. Hello and challenge carry the sender's
// view (From is the sender) and a fresh nonce; proof and verdict carry a
// MAC in Nonce; ready only a status.
type hsMsg struct {
	Version                 uint16
	Kind, Status            uint8
	Group                   uint64
	From, To, Size          uint32
	Window, SlotSize, Slots uint32
	Run                     [8]byte
	Nonce                   [32]byte
	Probe                   uint64
}

var errHandshake = errors.New("bad handshake message")

func (m *hsMsg) encode() []byte {
	b := make([]byte, hsSize)
	le := binary.LittleEndian
	copy(b[0:4], hsMagic[:])
	le.PutUint16(b[4:], m.Version)
	b[6], b[7] = m.Kind, m.Status
	le.PutUint64(b[8:], m.Group)
	le.PutUint32(b[16:], m.From)
	le.PutUint32(b[20:], m.To)
	le.PutUint32(b[24:], m.Size)
	le.PutUint32(b[28:], m.Window)
	le.PutUint32(b[32:], m.SlotSize)
	le.PutUint32(b[36:], m.Slots)
	copy(b[40:48], m.Run[:])
	copy(b[48:80], m.Nonce[:])
	le.PutUint64(b[80:], m.Probe)
	return b
}

// decodeHS parses a handshake message of kind kind. It checks the length,
// the magic, the kind and the status; the fields' meaning is the caller's
// to check.
func decodeHS(b []byte, kind uint8) (hsMsg, error) {
	var m hsMsg
	if len(b) != hsSize {
		return m, fmt.Errorf("%w: %d bytes", errHandshake, len(b))
	}
	if [4]byte(b[0:4]) != hsMagic {
		return m, fmt.Errorf("%w: not a choreo/shm peer (magic %q)", errHandshake, b[0:4])
	}
	le := binary.LittleEndian
	m = hsMsg{Version: le.Uint16(b[4:]), Kind: b[6], Status: b[7], Group: le.Uint64(b[8:]),
		From: le.Uint32(b[16:]), To: le.Uint32(b[20:]), Size: le.Uint32(b[24:]),
		Window: le.Uint32(b[28:]), SlotSize: le.Uint32(b[32:]), Slots: le.Uint32(b[36:]),
		Run: [8]byte(b[40:48]), Nonce: [32]byte(b[48:80]), Probe: le.Uint64(b[80:])}
	if m.Kind != kind {
		return m, fmt.Errorf("%w: kind %d, want %d", errHandshake, m.Kind, kind)
	}
	if m.Status > stMax {
		return m, fmt.Errorf("%w: status %d", errHandshake, m.Status)
	}
	return m, nil
}

// MAC labels: each side's proof is bound to its role.
const (
	labelDialer   = "choreo/shm/v1 dialer proof"
	labelAcceptor = "choreo/shm/v1 acceptor proof"
)

func handshakeMAC(secret []byte, label string, hello, challenge []byte) [32]byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	h.Write(hello)
	h.Write(challenge)
	return [32]byte(h.Sum(nil))
}

// refusal is the error a refused side reports.
func refusal(st uint8) error {
	return fmt.Errorf("refused by the peer: %s", statusText[st])
}

// windowOK checks an announced window.
func windowOK(w uint32) bool { return w >= msgOverhead && w <= maxRegion }
