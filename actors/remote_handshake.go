package actors

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
// (all lengths in bytes):
//
//	server -> client  version(1) | server nonce(32)
//	client -> server  version(1) | client nonce(32) | len(1) | address(len) | client proof(32)
//	server -> client  accept(1)  | server proof(32)     or     refuse(1), then close
//
// The client proof is HMAC-SHA256(secret, clientLabel | server nonce |
// client nonce | len | address), the server proof the same with
// serverLabel; address is the client's advertised control address (what
// its PIDs carry), 1 to 255 bytes. Both nonces are fresh random bytes, so
// no message of one handshake is valid in another. Each direction's
// record key is HKDF-SHA256(secret, salt: server nonce | client nonce,
// info: its label).
const (
	hsVersion   = 2
	hsNonce     = 32
	hsMAC       = sha256.Size
	hsMaxAddr   = 255
	hsAccept    = 1
	hsRefuse    = 0
	clientLabel = "choreo control v2 client proof"
	serverLabel = "choreo control v2 server proof"
	c2sLabel    = "choreo control v2 client to server"
	s2cLabel    = "choreo control v2 server to client"
	// hsServerHello and hsClientMax are the two fixed buffers a handshake
	// reads into.
	hsServerHello = 1 + hsNonce
	hsClientFixed = 1 + hsNonce + 1
	hsClientMax   = hsClientFixed + hsMaxAddr + hsMAC
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
		return fmt.Errorf("actors: remote: handshake nonce: %w", err)
	}
	return nil
}

// clientHello is the client's message: version, nonce, address, proof.
func (t *hsTranscript) clientHello(secret []byte) []byte {
	b := make([]byte, 0, hsClientFixed+len(t.addr)+hsMAC)
	b = append(b, hsVersion)
	b = append(b, t.client[:]...)
	b = append(b, byte(len(t.addr)))
	b = append(b, t.addr...)
	return append(b, t.proof(secret, clientLabel)...)
}

// errHandshake is a handshake that broke off for a reason other than a
// wrong proof (a stranger's bytes, a wrong version or length); the server
// logs it and closes.
var errHandshake = errors.New("not a choreo control handshake")

// parseClientHello reads the client's message into t (whose server nonce
// is set) from r, into buf alone, and returns the proof it carries.
func parseClientHello(r io.Reader, buf *[hsClientMax]byte, t *hsTranscript) (proof []byte, n int, err error) {
	// the version byte alone first: a stranger's bytes are refused at once
	n, err = io.ReadFull(r, buf[:1])
	if err != nil {
		return nil, n, err
	}
	if buf[0] != hsVersion {
		return nil, n, fmt.Errorf("%w: version byte %#x, want %#x", errHandshake, buf[0], hsVersion)
	}
	m, err := io.ReadFull(r, buf[1:hsClientFixed])
	n += m
	if err != nil {
		return nil, n, err
	}
	copy(t.client[:], buf[1:1+hsNonce])
	al := int(buf[hsClientFixed-1])
	if al == 0 {
		return nil, n, fmt.Errorf("%w: empty address", errHandshake)
	}
	m, err = io.ReadFull(r, buf[hsClientFixed:hsClientFixed+al+hsMAC])
	n += m
	if err != nil {
		return nil, n, err
	}
	t.addr = string(buf[hsClientFixed : hsClientFixed+al])
	return buf[hsClientFixed+al : hsClientFixed+al+hsMAC], n, nil
}
