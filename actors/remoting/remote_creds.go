package remoting

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/credentials"

	"github.com/choreo-gpu/choreo/internal/gate"
)

// authType names the control handshake in gRPC's AuthInfo and ProtocolInfo.
const authType = "choreo-control"

// peerInfo is a control connection's gRPC AuthInfo. On the server side
// Addr is the client's advertised control address, proven by its
// handshake (the only address its messages may speak for); on the client
// side it is the address dialled.
type peerInfo struct {
	credentials.CommonAuthInfo
	Addr string
}

// AuthType implements credentials.AuthInfo.
func (peerInfo) AuthType() string { return authType }

// controlCreds is the control plane's gRPC TransportCredentials: every
// connection, in both directions, runs the mutual challenge-response of
// remote_handshake.go on the raw TCP connection before HTTP/2 starts, and
// then carries AES-256-GCM records (recordConn). It is safe for concurrent
// use; Clone shares its gate and its record of failures.
//
// Server side: the handshake waits behind a gate.Door (quiet
// until the client's first message is in, spoken until its proof checks
// out) and is bounded by handshakeTimeout; it reads into one fixed buffer,
// allocates nothing more for a stranger, and logs a wrong proof or a
// client's refusal of its own at Warn ("authentication failed"; at most
// once a second, the rest at Debug: strangerWarns), a
// connection closed before its first byte (a reachability probe), a
// silent one or one cut by a gate at Debug. A client that proved the
// secret then has dialWait, not handshakeTimeout, to start HTTP/2.
//
// Client side: the handshake is bounded by dialWait (the peer timeout: a
// paused peer is not refused sooner) and by grpc's context; one the peer
// broke off (closed or reset) is tried again on a new connection within
// that bound, and a redial refused ends it; a refusal, a
// wrong server proof or a server that does not speak the handshake is an
// error wrapping ErrAuth, and the latest such error is kept, with their
// count (authFailures).
type controlCreds struct {
	secret      []byte
	addr        string        // this runtime's advertised address, claimed as a client
	dialWait    time.Duration // a client handshake's bound
	peerTimeout time.Duration // the record layer's silence bound
	gates       *gate.Door
	log         *zap.Logger
	strangers   *strangerWarns // what strangers cause, at Warn at most once a second
	failures    *authFailures
}

// authFailures keeps the latest ErrAuth a runtime's dials met, and how
// many there were.
type authFailures struct {
	mu   sync.Mutex
	n    uint64
	last error
}

func (a *authFailures) note(err error) {
	a.mu.Lock()
	a.n++
	a.last = err
	a.mu.Unlock()
}

func (a *authFailures) get() (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n, a.last
}

// newControlCreds makes the credentials of a runtime advertising addr.
func newControlCreds(secret []byte, addr string, peerTimeout time.Duration, log *zap.Logger) *controlCreds {
	return &controlCreds{
		secret: secret, addr: addr, dialWait: max(handshakeTimeout, peerTimeout), peerTimeout: peerTimeout,
		gates: gate.NewDoor(), log: log, strangers: &strangerWarns{log: log}, failures: &authFailures{},
	}
}

// Info implements credentials.TransportCredentials.
func (c *controlCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: authType, SecurityVersion: "3"}
}

// Clone implements credentials.TransportCredentials.
func (c *controlCreds) Clone() credentials.TransportCredentials {
	cp := *c
	return &cp
}

// OverrideServerName implements credentials.TransportCredentials; the
// handshake has no server name.
func (c *controlCreds) OverrideServerName(string) error { return nil }

// ServerHandshake authenticates a connection a stranger may have opened.
func (c *controlCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	from := raw.RemoteAddr().String()
	end := time.Now().Add(handshakeTimeout)
	_ = raw.SetDeadline(end) // gRPC clears it once HTTP/2 has started
	g, err := admit(c.gates, raw, end)
	if err != nil {
		return c.serverFailed(from, nil, 0, err)
	}
	defer g.Leave()
	var t hsTranscript
	var buf [hsClientMax]byte
	n, err := parseClientHello(raw, &buf, &t)
	if err == nil {
		err = g.Heard()
	}
	if err != nil {
		return c.serverFailed(from, g, n, err)
	}
	if err := nonce(&t.server); err != nil {
		return nil, nil, err
	}
	reply := t.serverReply(c.secret)
	if _, err := raw.Write(reply[:]); err != nil {
		return c.serverFailed(from, g, n, err)
	}
	answer := buf[:hsAnswer]
	m, err := io.ReadFull(raw, answer[:1])
	n += m
	if err == nil && answer[0] == hsAccept {
		m, err = io.ReadFull(raw, answer[1:])
		n += m
	}
	switch {
	case err != nil:
		return c.serverFailed(from, g, n, err)
	case answer[0] == hsRefuse:
		c.strangers.warn("remote: authentication failed", zap.String("peer", from), zap.String("claimed", t.addr),
			zap.String("why", "the client refused this runtime's proof of the group secret"))
		return nil, nil, fmt.Errorf("remoting: handshake from %s claiming %q: it refused this runtime's proof: %w", from, t.addr, ErrAuth)
	case answer[0] != hsAccept:
		return c.serverFailed(from, g, n, fmt.Errorf("%w: answer byte %#x", errHandshake, answer[0]))
	case !hmac.Equal(answer[1:], t.proof(c.secret, clientLabel)):
		_, _ = raw.Write([]byte{hsRefuse})
		c.strangers.warn("remote: authentication failed", zap.String("peer", from), zap.String("claimed", t.addr),
			zap.String("why", "the client's proof of the group secret is wrong"))
		return nil, nil, fmt.Errorf("remoting: handshake from %s claiming %q: %w", from, t.addr, ErrAuth)
	}
	// the client has proved the secret: out of the gates' reach before it
	// learns that it may use the connection
	if !g.Keep() {
		return c.serverFailed(from, g, n, gate.ErrCut)
	}
	if _, err := raw.Write([]byte{hsAccept}); err != nil {
		return c.serverFailed(from, g, n, err)
	}
	// a proven peer gets what a paused one gets to finish HTTP/2's start
	// (gRPC clears the deadline once it has): on a loaded machine it may
	// take longer than a stranger's bound, and cutting it here would fail
	// its connect to a live runtime
	_ = raw.SetDeadline(time.Now().Add(c.dialWait))
	rc, err := c.records(raw, &t, false, t.addr)
	if err != nil {
		return nil, nil, err
	}
	return rc, peerInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, Addr: t.addr}, nil
}

// serverFailed logs a server handshake that broke off after n bytes read
// (g is its place behind the door, nil if it never got one) and returns
// its error (io.EOF, which gRPC does not log, for a connection
// closed before its first byte).
func (c *controlCreds) serverFailed(from string, g *gate.Guest, n int, err error) (net.Conn, credentials.AuthInfo, error) {
	var ne net.Error
	switch {
	case errors.Is(err, errHandshake):
		c.strangers.warn("remote: refused a connection: not a choreo control handshake", zap.String("peer", from), zap.Error(err))
	case errors.Is(err, gate.ErrCut) || g != nil && g.Cut():
		c.log.Debug("remote: handshake cut to make room", zap.String("peer", from), zap.Int("read", n))
	case errors.Is(err, gate.ErrFull):
		c.log.Debug("remote: handshake slots full: refused a connection", zap.String("peer", from), zap.Int("read", n))
	case n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)):
		c.log.Debug("remote: connection closed before its handshake", zap.String("peer", from))
		return nil, nil, io.EOF
	case errors.As(err, &ne) && ne.Timeout():
		c.log.Debug("remote: handshake timed out", zap.String("peer", from), zap.Int("read", n), zap.Duration("bound", handshakeTimeout))
	default:
		c.log.Debug("remote: handshake broke off", zap.String("peer", from), zap.Int("read", n), zap.Error(err))
	}
	return nil, nil, fmt.Errorf("remoting: handshake from %s: %w", from, err)
}

// ClientHandshake authenticates a connection this runtime dialled to
// authority (the peer's control address). A handshake the peer broke off
// without a word (it closed or reset the connection: a loaded peer that
// took longer than its bound on a handshake) is tried again on a new
// connection, every redialWait, until dialWait has passed since the
// first: a live peer is not refused for being slow. A refused redial (no
// process listens there any more), a refusal of this runtime's proof, a
// wrong proof and the end of ctx end it at once.
func (c *controlCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if authority == "" {
		authority = raw.RemoteAddr().String()
	}
	deadline := time.Now().Add(c.dialWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for tries := 1; ; tries++ {
		rc, info, err := c.clientHandshake(ctx, authority, raw, deadline)
		if err == nil || !brokenOff(err) || ctx.Err() != nil || time.Until(deadline) < redialWait {
			return rc, info, err
		}
		c.log.Debug("remote: handshake broken off by the peer: dialling it again", zap.String("peer", authority),
			zap.Int("tries", tries), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("remoting: handshake with %s: %w (after %v)", authority, ctx.Err(), err)
		case <-time.After(redialWait):
		}
		dctx, cancel := context.WithDeadline(ctx, deadline)
		var d net.Dialer
		next, derr := d.DialContext(dctx, "tcp", authority)
		cancel()
		if derr != nil {
			return nil, nil, fmt.Errorf("remoting: handshake with %s: dialling again: %w (after %v)", authority, derr, err)
		}
		raw = next
	}
}

// redialWait is the pause before a broken-off client handshake is tried
// again on a new connection.
const redialWait = 100 * time.Millisecond

// brokenOff reports whether a client handshake failed because the peer
// closed or reset the connection (not a refusal, a wrong proof or a
// timeout of this side's own bound).
func brokenOff(err error) bool {
	return !errors.Is(err, ErrAuth) &&
		(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
}

// clientHandshake runs one client handshake on raw, bounded by deadline
// and ctx; it closes raw when it fails.
func (c *controlCreds) clientHandshake(ctx context.Context, authority string, raw net.Conn, deadline time.Time) (_ net.Conn, _ credentials.AuthInfo, err error) {
	defer func() {
		if err != nil {
			_ = raw.Close()
			if errors.Is(err, ErrAuth) {
				c.failures.note(err)
				c.log.Warn("remote: authentication failed", zap.String("peer", authority), zap.Error(err))
			}
		}
	}()
	_ = raw.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	fail := func(what string, err error) error {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("remoting: handshake with %s: %s: %w", authority, what, err)
	}
	t := hsTranscript{addr: c.addr}
	if err := nonce(&t.client); err != nil {
		return nil, nil, err
	}
	if _, err := raw.Write(t.clientHello()); err != nil {
		return nil, nil, fail("sending this runtime's hello", err)
	}
	var reply [hsServerReply]byte
	if _, err := io.ReadFull(raw, reply[:]); err != nil {
		return nil, nil, fail("reading its proof", err)
	}
	copy(t.server[:], reply[:hsNonce])
	if !hmac.Equal(reply[hsNonce:], t.proof(c.secret, serverLabel)) {
		_, _ = raw.Write([]byte{hsRefuse})
		return nil, nil, fail("its proof of the group secret is wrong", ErrAuth)
	}
	var answer [hsAnswer]byte
	answer[0] = hsAccept
	copy(answer[1:], t.proof(c.secret, clientLabel))
	if _, err := raw.Write(answer[:]); err != nil {
		return nil, nil, fail("sending this runtime's proof", err)
	}
	var verdict [1]byte
	if _, err := io.ReadFull(raw, verdict[:]); err != nil {
		return nil, nil, fail("reading its verdict", err)
	}
	if verdict[0] != hsAccept {
		return nil, nil, fail("it refused this runtime's proof of the group secret", ErrAuth)
	}
	if !stop() { // ctx ended: its deadline in the past may land after the line below
		return nil, nil, fail("cancelled", ctx.Err())
	}
	_ = raw.SetDeadline(time.Time{})
	rc, err := c.records(raw, &t, true, authority)
	if err != nil {
		return nil, nil, err
	}
	return rc, peerInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, Addr: authority}, nil
}

// records derives the connection's two keys and starts its record layer.
func (c *controlCreds) records(raw net.Conn, t *hsTranscript, client bool, peer string) (*recordConn, error) {
	c2s, err := hkdf.Key(sha256.New, c.secret, t.salt(), c2sLabel, recordKey)
	if err != nil {
		return nil, fmt.Errorf("remoting: record keys: %w", err)
	}
	s2c, err := hkdf.Key(sha256.New, c.secret, t.salt(), s2cLabel, recordKey)
	if err != nil {
		return nil, fmt.Errorf("remoting: record keys: %w", err)
	}
	send, recv := s2c, c2s
	if client {
		send, recv = c2s, s2c
	}
	rc, err := newRecordConn(raw, send, recv, c.peerTimeout, c.log.With(zap.String("peer", peer)))
	if err != nil {
		return nil, fmt.Errorf("remoting: record layer: %w", err)
	}
	return rc, nil
}

// authFailure is the first ErrAuth this runtime's dials met, nil if none.
func (c *controlCreds) authFailures() (uint64, error) { return c.failures.get() }
