package remoting

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// ErrAuth: a control-plane connection failed its handshake: the peer
// refused this runtime's proof of the group's secret, or its own proof
// was wrong (another group's secret, or not a choreo runtime at all).
var ErrAuth = errors.New("authentication failed")

// The control handshake, on the raw TCP connection before HTTP/2 starts
// (all lengths in bytes). The client speaks first, as soon as it has
// connected, so a server can tell a real client from a silent stranger by
// whether its first message is in (see gate.Door):
//
//	client -> server  version(1) | client nonce(32) | len(1) | address(len)
//	server -> client  server nonce(32) | server proof(32)
//	client -> server  accept(1) | client proof(32)    or    refuse(1), then close
//	server -> client  accept(1)                       or    refuse(1), then close
//
// The server proof is HMAC-SHA256(secret, serverLabel | server nonce |
// client nonce | len | address), the client proof the same with
// clientLabel; address is the client's advertised control address (what
// its PIDs carry), 1 to 255 bytes. The client checks the server's proof
// before it sends its own, and refuses a wrong one (so the server, too,
// learns that the secrets differ). Both nonces are fresh random bytes and
// the two proofs are under different labels, so no message of one
// handshake is valid in another, nor one side's proof as the other's.
// Until the client's proof checks out the server reads into one fixed
// buffer of hsClientMax bytes. Each direction's record key is
// HKDF-SHA256(secret, salt: server nonce | client nonce, info: its label).
const (
	hsVersion   = 3
	hsNonce     = 32
	hsMAC       = sha256.Size
	hsMaxAddr   = 255
	hsAccept    = 1
	hsRefuse    = 0
	clientLabel = "choreo control v3 client proof"
	serverLabel = "choreo control v3 server proof"
	c2sLabel    = "choreo control v3 client to server"
	s2cLabel    = "choreo control v3 server to client"
	// hsClientFixed is the client's first message up to its address,
	// hsClientMax the server's one buffer (the client's first message at
	// its longest; its later answer fits too).
	hsClientFixed = 1 + hsNonce + 1
	hsClientMax   = hsClientFixed + hsMaxAddr
	hsServerReply = hsNonce + hsMAC
	hsAnswer      = 1 + hsMAC
)

// hsTranscript is what a handshake's proofs sign, and its keys' salt.
type hsTranscript struct {
	server, client [hsNonce]byte
	addr           string
}

// proof is HMAC-SHA256(secret, label | server nonce | client nonce | len |
// address).
func (t *hsTranscript) proof(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(t.server[:])
	m.Write(t.client[:])
	m.Write([]byte{byte(len(t.addr))})
	m.Write([]byte(t.addr))
	return m.Sum(nil)
}

// salt is the key derivation's salt: both nonces.
func (t *hsTranscript) salt() []byte {
	s := make([]byte, 0, 2*hsNonce)
	s = append(s, t.server[:]...)
	return append(s, t.client[:]...)
}

// nonce fills n with random bytes.
func nonce(n *[hsNonce]byte) error {
	if _, err := io.ReadFull(rand.Reader, n[:]); err != nil {
		return fmt.Errorf("remoting: handshake nonce: %w", err)
	}
	return nil
}

// clientHello is the client's first message: version, nonce, address.
func (t *hsTranscript) clientHello() []byte {
	b := make([]byte, 0, hsClientFixed+len(t.addr))
	b = append(b, hsVersion)
	b = append(b, t.client[:]...)
	b = append(b, byte(len(t.addr)))
	return append(b, t.addr...)
}

// serverReply is the server's message: its nonce and its proof.
func (t *hsTranscript) serverReply(secret []byte) [hsServerReply]byte {
	var r [hsServerReply]byte
	copy(r[:], t.server[:])
	copy(r[hsNonce:], t.proof(secret, serverLabel))
	return r
}

// errHandshake is a handshake that broke off for a reason other than a
// wrong proof (a stranger's bytes, a wrong version or length); the server
// logs it and closes.
var errHandshake = errors.New("not a choreo control handshake")

// parseClientHello reads the client's first message into t from r, into
// buf alone, and returns how many bytes it read.
func parseClientHello(r io.Reader, buf *[hsClientMax]byte, t *hsTranscript) (n int, err error) {
	// the version byte alone first: a stranger's bytes are refused at once
	n, err = io.ReadFull(r, buf[:1])
	if err != nil {
		return n, err
	}
	if buf[0] != hsVersion {
		return n, fmt.Errorf("%w: version byte %#x, want %#x", errHandshake, buf[0], hsVersion)
	}
	m, err := io.ReadFull(r, buf[1:hsClientFixed])
	n += m
	if err != nil {
		return n, err
	}
	copy(t.client[:], buf[1:1+hsNonce])
	al := int(buf[hsClientFixed-1])
	if al == 0 {
		return n, fmt.Errorf("%w: empty address", errHandshake)
	}
	m, err = io.ReadFull(r, buf[hsClientFixed:hsClientFixed+al])
	n += m
	if err != nil {
		return n, err
	}
	t.addr = string(buf[hsClientFixed : hsClientFixed+al])
	return n, nil
}
