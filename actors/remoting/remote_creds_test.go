package remoting

// The control handshake and record layer on real loopback sockets, without
// gRPC or protoactor (so any number of them may run in this process).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/credentials"
)

var (
	groupSecret = []byte("0123456789abcdef-group-secret")
	otherSecret = []byte("another group's secret, 32 bytes")
)

// testBound bounds every wait here; never a timing assertion.
const testBound = 20 * time.Second

// leakCheck fails t when goroutines it started outlive its cleanups; call
// it first.
func leakCheck(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// side is one end's credentials and what it logged.
type side struct {
	c    *controlCreds
	logs *observer.ObservedLogs
}

func newSide(secret []byte, addr string, peerTimeout time.Duration) side {
	core, logs := observer.New(zapcore.DebugLevel)
	return side{c: newControlCreds(secret, addr, peerTimeout, zap.New(core)), logs: logs}
}

// warned counts the Warn lines containing s.
func (s side) warned(msg string) int {
	n := 0
	for _, e := range s.logs.All() {
		if e.Level == zapcore.WarnLevel && strings.Contains(e.Message, msg) {
			n++
		}
	}
	return n
}

// serverResult is what one ServerHandshake returned.
type serverResult struct {
	conn net.Conn
	info credentials.AuthInfo
	err  error
}

// listen serves one handshake per accepted connection with srv.
func listen(t testing.TB, srv side) (string, chan serverResult) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan serverResult, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, info, err := srv.c.ServerHandshake(raw)
				if err != nil {
					_ = raw.Close()
				} else {
					_ = raw.SetDeadline(time.Time{}) // as gRPC does once HTTP/2 has started
				}
				res <- serverResult{c, info, err}
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return ln.Addr().String(), res
}

// dialHandshake dials addr and runs cli's client handshake.
func dialHandshake(t testing.TB, cli side, addr string) (net.Conn, credentials.AuthInfo, error) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, testBound)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	return cli.c.ClientHandshake(ctx, addr, raw)
}

func serverDone(t testing.TB, res chan serverResult) serverResult {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(testBound):
		t.Fatal("the server handshake did not end")
		return serverResult{}
	}
}

func TestHandshakeRoundTrip(t *testing.T) {
	leakCheck(t)
	srv, cli := newSide(groupSecret, "server:1", time.Minute), newSide(groupSecret, "127.0.0.1:4242", time.Minute)
	addr, res := listen(t, srv)
	cc, cinfo, err := dialHandshake(t, cli, addr)
	if err != nil {
		t.Fatal(err)
	}
	r := serverDone(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	si, ok := r.info.(peerInfo)
	if !ok || si.Addr != "127.0.0.1:4242" || si.SecurityLevel != credentials.PrivacyAndIntegrity {
		t.Fatalf("server's AuthInfo %+v, want the client's proven address", r.info)
	}
	if ci := cinfo.(peerInfo); ci.Addr != addr {
		t.Fatalf("client's AuthInfo %+v, want %s", ci, addr)
	}
	// both ways at once, more than one record each, read back exactly
	up, down := make([]byte, 3*recMaxPlain+17), make([]byte, 1<<20)
	_, _ = rand.Read(up)
	_, _ = rand.Read(down)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = cc.Write(up) }()
	go func() { defer wg.Done(); _, _ = r.conn.Write(down) }()
	gotUp, gotDown := make([]byte, len(up)), make([]byte, len(down))
	if _, err := io.ReadFull(r.conn, gotUp); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(cc, gotDown); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !bytes.Equal(up, gotUp) || !bytes.Equal(down, gotDown) {
		t.Fatal("the records did not carry the bytes unchanged")
	}
	if lastAuth(cli.c) != nil || srv.warned("") != 0 {
		t.Fatalf("auth failure %v, warnings %v", lastAuth(cli.c), srv.logs.All())
	}
	_ = cc.Close()
	if _, err := r.conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the peer closed: %v, want EOF", err)
	}
	_ = r.conn.Close()
}

func TestHandshakeWrongSecretEitherSide(t *testing.T) {
	leakCheck(t)
	for _, tc := range []struct {
		name     string
		srv, cli []byte
	}{{"client has another secret", groupSecret, otherSecret}, {"server has another secret", otherSecret, groupSecret}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := newSide(tc.srv, "server:1", time.Minute), newSide(tc.cli, "127.0.0.1:4242", time.Minute)
			addr, res := listen(t, srv)
			if lastAuth(cli.c) != nil {
				t.Fatal("an authentication failure before any dial")
			}
			_, _, err := dialHandshake(t, cli, addr)
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("client: %v, want ErrAuth", err)
			}
			if r := serverDone(t, res); !errors.Is(r.err, ErrAuth) {
				t.Fatalf("server: %v, want ErrAuth", r.err)
			}
			af := lastAuth(cli.c)
			if !errors.Is(af, ErrAuth) || !strings.Contains(af.Error(), addr) || !strings.Contains(af.Error(), "authentication failed") {
				t.Fatalf("authentication failure %v, want ErrAuth naming %s", af, addr)
			}
			if srv.warned("authentication failed") != 1 {
				t.Fatalf("server logged %v, want one Warn: authentication failed", srv.logs.All())
			}
			for _, e := range srv.logs.FilterMessage("remote: authentication failed").All() {
				if p := e.ContextMap()["peer"]; p == nil || !strings.HasPrefix(p.(string), "127.0.0.1:") {
					t.Fatalf("the Warn does not name the remote address: %v", e.ContextMap())
				}
			}
			// a second failure counts, and is the latest
			_, _, _ = dialHandshake(t, cli, addr)
			serverDone(t, res)
			if n, last := cli.c.authFailures(); n != 2 || last == af || !errors.Is(last, ErrAuth) {
				t.Fatalf("after a second failure: %d failures, latest %v", n, last)
			}
		})
	}
}

// TestHandshakeBadServerProof: a server that answers without knowing the
// secret (its proof is random) fails the client's handshake, and the
// client refuses it rather than send a proof of its own.
func TestHandshakeBadServerProof(t *testing.T) {
	leakCheck(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	done := make(chan []byte, 1) // what the client answered
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- nil
			return
		}
		defer func() { _ = c.Close() }()
		var buf [hsClientMax]byte
		var tr hsTranscript
		if _, err := parseClientHello(c, &buf, &tr); err != nil {
			done <- nil
			return
		}
		reply := make([]byte, hsServerReply)
		_, _ = rand.Read(reply)
		_, _ = c.Write(reply)
		_ = c.SetReadDeadline(time.Now().Add(testBound))
		got, _ := io.ReadAll(c)
		done <- got
	}()
	cli := newSide(groupSecret, "127.0.0.1:4242", time.Minute)
	_, _, err = dialHandshake(t, cli, ln.Addr().String())
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "proof") {
		t.Fatalf("client: %v, want ErrAuth for a wrong proof", err)
	}
	if !errors.Is(lastAuth(cli.c), ErrAuth) {
		t.Fatalf("authentication failure %v", lastAuth(cli.c))
	}
	if got := <-done; !bytes.Equal(got, []byte{hsRefuse}) {
		t.Fatalf("the client answered %x, want a refusal alone", got)
	}
}

// recorder is a raw connection that keeps what its client writes.
type recorder struct {
	net.Conn
	mu    sync.Mutex
	wrote bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.wrote.Write(p)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

func TestHandshakeReplayRefused(t *testing.T) {
	leakCheck(t)
	srv, cli := newSide(groupSecret, "server:1", time.Minute), newSide(groupSecret, "127.0.0.1:4242", time.Minute)
	addr, res := listen(t, srv)
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Conn: raw}
	cc, _, err := cli.c.ClientHandshake(context.Background(), addr, rec)
	if err != nil {
		t.Fatal(err)
	}
	r := serverDone(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, err := cc.Write([]byte("a control message")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r.conn, make([]byte, 17)); err != nil {
		t.Fatal(err)
	}
	_ = cc.Close()
	_ = r.conn.Close()

	// replayed whole: the server's new nonce makes the recorded proof wrong
	rec.mu.Lock()
	recorded := append([]byte(nil), rec.wrote.Bytes()...)
	rec.mu.Unlock()
	re, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = re.Close() }()
	_, _ = re.Write(recorded)
	_ = re.SetReadDeadline(time.Now().Add(testBound))
	got, _ := io.ReadAll(re)
	if len(got) != hsServerReply+1 || got[hsServerReply] != hsRefuse {
		t.Fatalf("the replay got %d bytes back (%x), want the server's nonce and proof and a refusal", len(got), got)
	}
	if r := serverDone(t, res); !errors.Is(r.err, ErrAuth) {
		t.Fatalf("server: %v, want ErrAuth", r.err)
	}
	if srv.warned("authentication failed") != 1 {
		t.Fatalf("server logged %v", srv.logs.All())
	}
}

func TestServerHandshakeStrangers(t *testing.T) {
	leakCheck(t)
	srv := newSide(groupSecret, "server:1", time.Minute)
	addr, res := listen(t, srv)

	// a reachability probe: connects and closes at once, logged at Debug
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if r := serverDone(t, res); !errors.Is(r.err, io.EOF) {
		t.Fatalf("probe: %v, want io.EOF", r.err)
	}
	// garbage: refused at its first byte, logged at Warn
	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n and more bytes that follow it"))
	if r := serverDone(t, res); !errors.Is(r.err, errHandshake) {
		t.Fatalf("garbage: %v, want a refusal", r.err)
	}
	_ = c.Close()
	// silent: cut at the handshake's bound, logged at Debug
	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := serverDone(t, res)
	var ne net.Error
	if !errors.As(r.err, &ne) || !ne.Timeout() {
		t.Fatalf("silent: %v, want a timeout", r.err)
	}
	_ = c.Close()
	if srv.warned("") != 1 || srv.warned("not a choreo control handshake") != 1 {
		t.Fatalf("warnings %v, want one, for the garbage", srv.logs.All())
	}
	if n := srv.logs.FilterMessage("remote: connection closed before its handshake").Len(); n != 1 {
		t.Fatalf("%d probe lines at Debug, want 1", n)
	}
}

// pair is an authenticated connection pair over loopback.
func pair(t testing.TB, peerTimeout time.Duration) (cli, srv net.Conn) {
	t.Helper()
	s, c := newSide(groupSecret, "server:1", peerTimeout), newSide(groupSecret, "127.0.0.1:4242", peerTimeout)
	addr, res := listen(t, s)
	cc, _, err := dialHandshake(t, c, addr)
	if err != nil {
		t.Fatal(err)
	}
	r := serverDone(t, res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return cc, r.conn
}

func TestRecordTamperedClosesTheConnection(t *testing.T) {
	leakCheck(t)
	for _, tc := range []struct {
		name   string
		mangle func(rec []byte) []byte
	}{
		{"a flipped bit", func(rec []byte) []byte { rec[len(rec)-1] ^= 1; return rec }},
		{"a length over the maximum", func(rec []byte) []byte {
			binary.BigEndian.PutUint32(rec, recMaxSealed+1)
			return rec
		}},
		{"a record replayed", func(rec []byte) []byte { return append(rec, rec...) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, sc := pair(t, time.Minute)
			rc := cc.(*recordConn)
			// seal one record as the client would, then send it mangled on the raw connection
			// (wmu held through the write, so that no heartbeat, sealed
			// with the next counter, goes out before it)
			rc.wmu.Lock()
			out := append([]byte(nil), sealOne(rc, []byte("hello"))...)
			_, err := rc.raw.Write(tc.mangle(out))
			rc.wmu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			var n int
			n, err = io.ReadAtLeast(sc, buf, 1)
			if tc.name == "a record replayed" { // the first copy opens, the second does not
				if err != nil || string(buf[:n]) != "hello" {
					t.Fatalf("first copy: %q, %v", buf[:n], err)
				}
				_, err = sc.Read(buf)
			}
			if !errors.Is(err, errRecord) {
				t.Fatalf("read: %v, want a bad record", err)
			}
			// the server closed: the client's read ends (EOF or a reset)
			_ = cc.SetReadDeadline(time.Now().Add(testBound))
			var ne net.Error
			if _, err := cc.Read(buf); err == nil || errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("client after the refusal: %v, want the connection closed", err)
			}
			_ = cc.Close()
			_ = sc.Close()
		})
	}
}

// sealOne seals p as rc's next record and returns its bytes (wbuf's).
func sealOne(rc *recordConn, p []byte) []byte {
	var hdr [recHeader]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(p)+recTag))
	binary.BigEndian.PutUint64(rc.wnonce[recNonce-8:], rc.wctr)
	rc.wctr++
	return rc.seal.Seal(append(rc.wbuf[:0], hdr[:]...), rc.wnonce[:], p, hdr[:])
}

// TestRecordSilenceAndHeartbeats: an idle pair stays up past its peer
// timeout on heartbeats alone (the false-positive twin), and a peer that
// goes silent (its raw connection held, nothing written) is cut after the
// timeout.
func TestRecordSilenceAndHeartbeats(t *testing.T) {
	leakCheck(t)
	const timeout = 800 * time.Millisecond
	cc, sc := pair(t, timeout)
	// the server side keeps reading, as gRPC's transport does
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 10)
		_, err := io.ReadFull(sc, buf)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(buf)
	}()
	// the client side reads too, until it has seen the timeout pass thrice
	cerr := make(chan error, 1)
	go func() {
		_ = cc.SetReadDeadline(time.Now().Add(3 * timeout))
		_, err := cc.Read(make([]byte, 1))
		cerr <- err
	}()
	var ne net.Error
	if err := <-cerr; !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("idle client: %v, want its own read deadline", err)
	}
	_ = cc.SetReadDeadline(time.Time{})
	if _, err := cc.Write([]byte("still here")); err != nil {
		t.Fatalf("idle pair: %v", err)
	}
	if g := <-got; g != "still here" {
		t.Fatalf("idle pair: %q", g)
	}
	buf := make([]byte, 10)

	// stop the server side's heartbeats without closing its socket: the
	// client hears nothing and cuts the connection
	srv := sc.(*recordConn)
	srv.wmu.Lock() // holds back its heartbeats, as a paused process would
	// the server side still reads the client's heartbeats, so its own
	// watchdog keeps the connection: only the client's can cut it
	go func() { _, _ = io.Copy(io.Discard, sc) }()
	_ = cc.SetReadDeadline(time.Now().Add(testBound))
	_, err := cc.Read(buf)
	srv.wmu.Unlock()
	if err == nil || errors.Is(err, errRecord) {
		t.Fatalf("silent peer: read %v, want the connection closed", err)
	}
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the silent peer was not cut within the test's bound")
	}
	_ = cc.Close()
	_ = sc.Close()
}

// silentFlood keeps n silent connections open to addr, each dialled again
// as soon as the server closes it, until the returned func is called.
func silentFlood(t *testing.T, addr string, n int) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, 8)
			for {
				select {
				case <-done:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				_ = c.SetReadDeadline(time.Now().Add(testBound))
				_, _ = c.Read(b) // until the server closes it
				_ = c.Close()
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

// TestHandshakeThroughASilentFlood: while 300 silent connections are
// redialled as fast as the server closes them, 50 handshakes in a row
// each get in at once, and none of them is cut or refused by a gate.
func TestHandshakeThroughASilentFlood(t *testing.T) {
	leakCheck(t)
	srv, cli := newSide(groupSecret, "server:1", time.Minute), newSide(groupSecret, "127.0.0.1:4242", time.Minute)
	quit, drained := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(quit); <-drained }) // after the listener's cleanup
	addr, res := listen(t, srv)
	go func() { // the server's results, closing what it accepted
		defer close(drained)
		for {
			select {
			case r := <-res:
				if r.err == nil {
					_ = r.conn.Close()
				}
			case <-quit:
				return
			}
		}
	}()
	stop := silentFlood(t, addr, 300)
	time.Sleep(time.Second) // the flood is under way: quiet is full
	var errs []error
	for range 50 {
		c, _, err := dialHandshake(t, cli, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := c.Write([]byte("hello")); err != nil {
			errs = append(errs, err)
		}
		_ = c.Close()
	}
	stop()
	q, s := srv.c.gates.Stats()
	t.Logf("quiet gate %+v, spoken gate %+v", q, s)
	if len(errs) > 0 {
		t.Fatalf("%d of 50 handshakes failed, the first: %v", len(errs), errs[0])
	}
	if q.Cut+q.Refused == 0 {
		t.Fatal("the flood never filled the quiet gate: it tested nothing")
	}
	if s.Cut+s.Refused != 0 {
		t.Fatalf("the spoken gate cut or refused %d connections, want none", s.Cut+s.Refused)
	}
	if srv.warned("") != 0 {
		t.Fatalf("the flood was logged at Warn: %v", srv.logs.FilterLevelExact(zapcore.WarnLevel).All())
	}
}

// TestHandshakeSlowFirstMessage is the false-positive twin of the quiet
// gate: a client that pauses 1 s between connecting and its first message
// still gets in on an idle server.
func TestHandshakeSlowFirstMessage(t *testing.T) {
	leakCheck(t)
	srv, cli := newSide(groupSecret, "server:1", time.Minute), newSide(groupSecret, "127.0.0.1:4242", time.Minute)
	addr, res := listen(t, srv)
	raw, err := net.DialTimeout("tcp", addr, testBound)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	cc, _, err := cli.c.ClientHandshake(ctx, addr, raw)
	if err != nil {
		t.Fatalf("a client 1 s slow to speak: %v", err)
	}
	r := serverDone(t, res)
	if r.err != nil {
		t.Fatalf("server: %v", r.err)
	}
	if _, err := cc.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r.conn, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	_ = cc.Close()
	_ = r.conn.Close()
}

// lastAuth is c's latest authentication failure, nil if none.
func lastAuth(c *controlCreds) error {
	_, err := c.authFailures()
	return err
}
