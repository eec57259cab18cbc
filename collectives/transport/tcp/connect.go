package tcp

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/internal/gate"
)

// What strangers may cost an acceptor.
const (
	// firstBytesMax bounds how long an acceptor waits for the dialer's
	// hello (at most HandshakeTimeout): a connection that says nothing
	// leaves after it.
	firstBytesMax = 2 * time.Second
	// crowdEvery is how often OnRefused hears of the connections the gate
	// turned away (refused, or cut to make room), as one error with their
	// number: a flood turns away thousands a second.
	crowdEvery = time.Second
)

// Listener is a rank's listening socket, opened before the ranks' addresses
// are handed out (so that a port the OS picked can be one of them) and
// used by exactly one Connect, which closes it.
type Listener struct {
	ln net.Listener
}

// Listen opens a TCP listener on addr ("host:port"; port 0 lets the OS
// pick one: read it back with Addr).
func Listen(addr string) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen: %w", err)
	}
	return &Listener{ln: ln}, nil
}

// Addr is the address the listener is bound to, "host:port".
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Close closes the listener (Connect does so itself).
func (l *Listener) Close() error { return l.ln.Close() }

// Connect joins the group without a Listener of the caller's: it listens
// on cfg.Addrs[cfg.Rank] (not where the rank only dials: rank 0, say) and
// goes on as Listener.Connect.
func Connect(ctx context.Context, cfg Config) (*Transport, error) {
	l, err := listenFor(cfg)
	if err != nil {
		return nil, err
	}
	return l.Connect(ctx, cfg)
}

// ConnectLinks is Connect without the Endpoint: it returns the links to
// cfg.Peers, indexed by rank (nil elsewhere), for a msg.Endpoint that may
// hold links of other transports too. That Endpoint's MaxBuffered must be
// at least cfg.MaxBuffered, the window this rank announces to its peers.
func ConnectLinks(ctx context.Context, cfg Config) ([]msg.Link, error) {
	l, err := listenFor(cfg)
	if err != nil {
		return nil, err
	}
	return l.ConnectLinks(ctx, cfg)
}

// listenFor listens on cfg.Addrs[cfg.Rank] where cfg's rank accepts
// connections, and returns nil where it does not.
func listenFor(cfg Config) (*Listener, error) {
	n, err := cfg.normalize()
	if err != nil || !n.accepts() {
		return nil, err
	}
	l, err := Listen(n.Addrs[n.Rank])
	if err != nil {
		return nil, fmt.Errorf("tcp: rank %d: %w", n.Rank, err)
	}
	return l, nil
}

// Connect builds this rank's part of the mesh and returns its endpoint
// once it has every connection to every peer (cfg.Peers): it dials
// cfg.ConnsPerPeer connections to each higher peer (retrying until the
// peer listens) and accepts as many from each lower peer on l, running the
// handshake on each (see the package doc). Connections that fail the
// handshake are refused and counted (Stats.Refused; Config.OnRefused) and
// change nothing. A stranger costs little: a connection must send its
// hello within 2 s (HandshakeTimeout if shorter), at most 256 handshakes
// wait at once, and silent connections cannot keep a dialer that speaks
// out (see acceptLoop); the connections turned away for room are reported
// to OnRefused together, at most once a second (errors.Is gate.ErrFull).
// The listener is closed when Connect returns: a group's mesh is built
// once. ctx bounds the whole; on failure everything is
// closed and the error names the peers still missing.
func (l *Listener) Connect(ctx context.Context, cfg Config) (*Transport, error) {
	if cfg.Peers != nil && len(cfg.Peers) != cfg.Size-1 {
		if l != nil {
			_ = l.Close()
		}
		return nil, fmt.Errorf("tcp: rank %d: connect: %w: peers %v: an Endpoint links every other rank (ConnectLinks links some)",
			cfg.Rank, transport.ErrBadArgument, cfg.Peers)
	}
	t, err := l.build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := t.start(); err != nil {
		return nil, err
	}
	return t, nil
}

// ConnectLinks is Connect without the Endpoint (see the function
// ConnectLinks).
func (l *Listener) ConnectLinks(ctx context.Context, cfg Config) ([]msg.Link, error) {
	t, err := l.build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return t.msgLinks(), nil
}

// build connects cfg's rank to its peers (see Connect); it closes l.
func (l *Listener) build(ctx context.Context, cfg Config) (*Transport, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		if l != nil {
			_ = l.Close()
		}
		return nil, err
	}
	t := newTransport(cfg)
	if len(cfg.Peers) == 0 {
		if l != nil {
			_ = l.Close()
		}
		return t, nil
	}
	if l == nil && cfg.accepts() {
		return nil, fmt.Errorf("tcp: rank %d: connect: %w: no listener", cfg.Rank, transport.ErrBadArgument)
	}
	m := &mesh{t: t, full: make(chan struct{}), errs: make(map[int]error), need: len(cfg.Peers) * cfg.ConnsPerPeer}
	sctx, cancel := context.WithCancel(ctx)
	if cfg.accepts() {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.acceptLoop(sctx, l.ln)
		}()
	} else if l != nil {
		_ = l.Close()
	}
	for _, p := range cfg.Peers {
		if p < cfg.Rank {
			continue
		}
		for i := range cfg.ConnsPerPeer {
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				m.dialLoop(sctx, p, i)
			}()
		}
	}
	select {
	case <-m.full:
	case <-ctx.Done():
	}
	cancel()
	if l != nil {
		_ = l.Close()
	}
	m.wg.Wait()
	m.flushCrowd()
	if missing := m.missing(); missing != "" {
		cerr := transport.CtxError(ctx)
		if cerr == nil {
			cerr = errors.New("incomplete")
		}
		t.closeLinks()
		return nil, fmt.Errorf("tcp: rank %d: connect: %w; not connected: %s", cfg.Rank, cerr, missing)
	}
	return t, nil
}

// mesh is the state of one Connect.
type mesh struct {
	t    *Transport
	wg   sync.WaitGroup
	full chan struct{}

	mu       sync.Mutex
	need     int
	have     int
	reserved map[[2]int]bool
	errs     map[int]error // last failure per peer

	crowdMu   sync.Mutex
	crowd     int       // connections turned away since the last report
	crowdAt   time.Time // the last report
	crowdFrom net.Addr  // the last one turned away, and why
	crowdWhy  error
}

// reserve claims the slot (p, i) for an accepted connection.
func (m *mesh) reserve(p, i int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reserved == nil {
		m.reserved = make(map[[2]int]bool)
	}
	if m.reserved[[2]int{p, i}] || m.t.links[p].conns[i] != nil {
		return false
	}
	m.reserved[[2]int{p, i}] = true
	return true
}

func (m *mesh) unreserve(p, i int) {
	m.mu.Lock()
	delete(m.reserved, [2]int{p, i})
	m.mu.Unlock()
}

// attach installs an authenticated connection in its slot.
func (m *mesh) attach(p, i int, nc net.Conn, peerMaxFrame, peerWindow int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	pr := m.t.links[p]
	if pr.conns[i] != nil {
		return false
	}
	delete(m.reserved, [2]int{p, i})
	pr.conns[i] = newConn(pr, i, nc)
	if pr.maxFrame == 0 { // the first of the peer's connections
		pr.maxFrame, pr.window = peerMaxFrame, peerWindow
	}
	pr.maxFrame = min(pr.maxFrame, peerMaxFrame)
	pr.window = min(pr.window, peerWindow)
	delete(m.errs, p)
	m.have++
	if m.have == m.need {
		close(m.full)
	}
	return true
}

func (m *mesh) noteErr(p int, err error) {
	m.mu.Lock()
	m.errs[p] = err
	m.mu.Unlock()
}

// missing names the peers without all their connections.
func (m *mesh) missing() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, p := range m.t.links {
		if p == nil {
			continue
		}
		if slices.Contains(p.conns, nil) {
			s := fmt.Sprintf("rank %d", p.rank)
			if e := m.errs[p.rank]; e != nil {
				s += " (" + e.Error() + ")"
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

// refuse counts a refused connection and reports it to OnRefused.
func (m *mesh) refuse(remote net.Addr, err error) {
	m.t.refused.Add(1)
	if f := m.t.cfg.OnRefused; f != nil {
		f(fmt.Errorf("tcp: rank %d: refused a connection from %v: %w", m.t.rank, remote, err))
	}
}

// turnedAway counts a connection the gate refused or cut, and reports it
// to OnRefused at once if none was reported in the last crowdEvery, else
// with the next report (or flushCrowd's).
func (m *mesh) turnedAway(remote net.Addr, err error) {
	m.t.refused.Add(1)
	m.crowdMu.Lock()
	m.crowd++
	m.crowdFrom, m.crowdWhy = remote, err
	due := time.Since(m.crowdAt) >= crowdEvery
	m.crowdMu.Unlock()
	if due {
		m.flushCrowd()
	}
}

// flushCrowd reports the connections turned away since the last report,
// if any.
func (m *mesh) flushCrowd() {
	m.crowdMu.Lock()
	n, from, why := m.crowd, m.crowdFrom, m.crowdWhy
	m.crowd, m.crowdAt = 0, time.Now()
	m.crowdMu.Unlock()
	if f := m.t.cfg.OnRefused; f != nil && n > 0 {
		f(fmt.Errorf("tcp: rank %d: refused %d connection(s), the last from %v: %w", m.t.rank, n, from, why))
	}
}

// acceptLoop accepts connections until the listener closes. Each waits
// behind one door (see gate.Door): in spoken when the dialer's hello is in
// when it is accepted, else in quiet until its hello is read, then in
// spoken. A flood of silent connections fills quiet only, and a real
// dialer, who sends its hello as soon as it connects, need not outlast
// them there.
func (m *mesh) acceptLoop(ctx context.Context, ln net.Listener) {
	door := gate.NewDoor()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (out of descriptors): pause briefly.
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		seat, err := door.Admit(nc, helloIn(nc))
		if err != nil {
			_ = nc.Close()
			m.turnedAway(nc.RemoteAddr(), err)
			continue
		}
		gu := &guest{Conn: nc, ctx: ctx, seat: seat}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			err := m.acceptOne(gu)
			seat.Leave()
			if err == nil {
				return
			}
			_ = nc.Close()
			if seat.Cut() {
				err = gate.ErrCut
			}
			if errors.Is(err, gate.ErrFull) {
				m.turnedAway(nc.RemoteAddr(), err)
			} else {
				m.refuse(nc.RemoteAddr(), err)
			}
		}()
	}
}

// helloIn reports whether a whole hello waits to be read on nc, reading
// nothing.
func helloIn(nc net.Conn) bool {
	var b [hsSize]byte
	if gate.Peek(nc, b[:], time.Time{}, nil) != hsSize {
		return false
	}
	m, err := decodeHS(b[:])
	return err == nil && m.Kind == hsHello
}

// guest is an accepted connection while its handshake runs, with its
// place behind the acceptor's door (seat): its reads wait at most
// firstBytesMax for the hello, and until the handshake's deadline after
// it; the end of ctx wakes them at once. Only the handshake's goroutine
// uses a guest.
type guest struct {
	net.Conn
	ctx  context.Context
	end  time.Time // the handshake's deadline
	seat *gate.Guest
}

// start sets the handshake's deadlines and has the end of ctx wake the
// connection; the returned func undoes the latter and reports whether ctx
// ended first.
func (g *guest) start(total, first time.Duration) func() bool {
	now := time.Now()
	g.end = now.Add(total)
	_ = g.Conn.SetDeadline(g.end)
	_ = g.Conn.SetReadDeadline(now.Add(min(first, total)))
	return context.AfterFunc(g.ctx, func() { _ = g.Conn.SetDeadline(aLongTimeAgo) })
}

// heard is told that the hello is in: the reads get the handshake's
// deadline, and a quiet guest moves to spoken (gate.ErrCut if quiet cut
// it first; gate.ErrFull if spoken is full).
func (g *guest) heard() error {
	_ = g.Conn.SetReadDeadline(g.end)
	if g.ctx.Err() != nil { // ctx ended before the line above: wake it again
		_ = g.Conn.SetDeadline(aLongTimeAgo)
	}
	return g.seat.Heard()
}

// heard and kept tell nc's guest, where nc is one, how its handshake
// goes: heard once the hello is in (an error ends the handshake), kept
// once the dialer has proved the secret (false: the gate cut it first).
func heard(nc net.Conn) error {
	if g, ok := nc.(*guest); ok {
		return g.heard()
	}
	return nil
}

func kept(nc net.Conn) bool {
	g, ok := nc.(*guest)
	return !ok || g.seat.Keep()
}

// bound gives nc the handshake's deadline, and a deadline in the past once
// ctx ends; the returned func undoes the latter and reports whether ctx
// ended first.
func (t *Transport) bound(ctx context.Context, nc net.Conn) func() bool {
	_ = nc.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	return context.AfterFunc(ctx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
}

func (m *mesh) acceptOne(g *guest) error {
	t := m.t
	stop := g.start(t.cfg.HandshakeTimeout, firstBytesMax)
	p, i, mf, win, err := t.acceptHandshake(g, m)
	nc := g.Conn
	if !stop() && err == nil {
		m.unreserve(p, i)
		return g.ctx.Err()
	}
	if err != nil {
		return err
	}
	_ = nc.SetDeadline(time.Time{})
	setNoDelay(nc)
	if !m.attach(p, i, nc, mf, win) {
		return errors.New("duplicate connection")
	}
	return nil
}

// dialLoop dials peer p's connection i until it is up or ctx ends.
func (m *mesh) dialLoop(ctx context.Context, p, i int) {
	backoff := 5 * time.Millisecond
	for {
		err := m.dialOne(ctx, p, i)
		if err == nil {
			return
		}
		m.noteErr(p, err)
		tm := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			tm.Stop()
			return
		case <-tm.C:
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

func (m *mesh) dialOne(ctx context.Context, p, i int) error {
	t := m.t
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, t.cfg.HandshakeTimeout)
	nc, err := d.DialContext(dctx, "tcp", t.cfg.Addrs[p])
	cancel()
	if err != nil {
		return err
	}
	stop := t.bound(ctx, nc)
	mf, win, err := t.dialHandshake(nc, p, i)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err == nil {
		_ = nc.SetDeadline(time.Time{})
		setNoDelay(nc)
		if !m.attach(p, i, nc, mf, win) {
			err = errors.New("duplicate connection")
		}
	}
	if err != nil {
		_ = nc.Close()
		return fmt.Errorf("%s: %w", t.cfg.Addrs[p], err)
	}
	return nil
}

func setNoDelay(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
}

func nonce() [32]byte {
	var n [32]byte
	_, _ = rand.Read(n[:])
	return n
}

// ourHello is the message this rank sends as a dialer (hello) or
// acceptor (challenge) to peer on connection i.
func (t *Transport) ourHello(kind uint8, peer, i int) hsMsg {
	return hsMsg{
		Version:  protoVersion,
		Kind:     kind,
		Group:    t.cfg.Group,
		From:     uint32(t.rank),
		To:       uint32(peer),
		Size:     uint32(t.size),
		Conn:     uint16(i),
		Conns:    uint16(t.cfg.ConnsPerPeer),
		MaxFrame: uint32(t.cfg.MaxFrame),
		Window:   uint32(t.cfg.MaxBuffered),
		Nonce:    nonce(),
	}
}

func readHS(r io.Reader, kind uint8) (hsMsg, []byte, error) {
	b := make([]byte, hsSize)
	if _, err := io.ReadFull(r, b); err != nil {
		return hsMsg{}, nil, err
	}
	m, err := decodeHS(b)
	if err != nil {
		return m, nil, err
	}
	if m.Kind != kind {
		return m, nil, fmt.Errorf("%w: kind %d, want %d", errHandshake, m.Kind, kind)
	}
	return m, b, nil
}

// refusal is the error a refused side reports.
func refusal(st uint8) error {
	return fmt.Errorf("refused by the peer: %s", statusText[st])
}

// limitsOK checks a peer's announced limits.
func limitsOK(m *hsMsg) bool {
	return m.MaxFrame >= minFrame && m.MaxFrame <= maxFrameLimit &&
		m.Window >= msg.Overhead && m.Window <= maxFrameLimit
}

// dialHandshake runs the dialer's side on nc: hello, challenge, proof,
// verdict. It returns the peer's limits.
func (t *Transport) dialHandshake(nc net.Conn, p, i int) (maxFrame, window int, err error) {
	hello := t.ourHello(hsHello, p, i)
	hb := hello.encode()
	if _, err := nc.Write(hb); err != nil {
		return 0, 0, err
	}
	ch, cb, err := readHS(nc, hsChallenge)
	if err != nil { // closed unread: a full acceptor, or one that cut it, is dialled again
		return 0, 0, fmt.Errorf("waiting for the challenge: %w", err)
	}
	if ch.Status != stOK {
		return 0, 0, refusal(ch.Status)
	}
	switch {
	case ch.Version != protoVersion:
		return 0, 0, fmt.Errorf("%w: version %d", errHandshake, ch.Version)
	case ch.Group != t.cfg.Group:
		return 0, 0, fmt.Errorf("%w: group %d, want %d", errHandshake, ch.Group, t.cfg.Group)
	case ch.From != uint32(p) || ch.To != uint32(t.rank):
		return 0, 0, fmt.Errorf("%w: ranks %d->%d, want %d->%d", errHandshake, ch.From, ch.To, p, t.rank)
	case ch.Size != uint32(t.size) || ch.Conns != uint16(t.cfg.ConnsPerPeer) || ch.Conn != uint16(i) || !limitsOK(&ch):
		return 0, 0, fmt.Errorf("%w: configuration differs", errHandshake)
	}
	proof := hsMsg{Version: protoVersion, Kind: hsProof, Nonce: handshakeMAC(t.cfg.Secret, labelDialer, hb, cb)}
	if _, err := nc.Write(proof.encode()); err != nil {
		return 0, 0, err
	}
	v, _, err := readHS(nc, hsVerdict)
	if err != nil {
		return 0, 0, err
	}
	if v.Status != stOK {
		return 0, 0, refusal(v.Status)
	}
	want := handshakeMAC(t.cfg.Secret, labelAcceptor, hb, cb)
	if !hmac.Equal(v.Nonce[:], want[:]) {
		return 0, 0, fmt.Errorf("%w: the peer does not know the secret", errHandshake)
	}
	return int(ch.MaxFrame), int(ch.Window), nil
}

// acceptHandshake runs the acceptor's side on nc and reserves the slot of
// the connection it authenticated.
func (t *Transport) acceptHandshake(nc net.Conn, m *mesh) (p, i, maxFrame, window int, err error) {
	hello, hb, err := readHS(nc, hsHello)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	if err := heard(nc); err != nil {
		return 0, 0, 0, 0, err
	}
	p, i = int(hello.From), int(hello.Conn)
	ch := t.ourHello(hsChallenge, p, i)
	var why error
	switch {
	case hello.Version != protoVersion:
		ch.Status, why = stVersion, fmt.Errorf("version %d", hello.Version)
	case hello.Group != t.cfg.Group:
		ch.Status, why = stGroup, fmt.Errorf("group %d (a rank of another run?)", hello.Group)
	case hello.To != uint32(t.rank) || hello.From >= uint32(t.rank) || t.links[hello.From] == nil:
		ch.Status, why = stRank, fmt.Errorf("ranks %d->%d", hello.From, hello.To)
	case hello.Size != uint32(t.size) || hello.Conns != uint16(t.cfg.ConnsPerPeer) || hello.Conn >= hello.Conns || !limitsOK(&hello):
		ch.Status, why = stConfig, errors.New("configuration differs")
	}
	if why != nil {
		ch.Nonce = [32]byte{}
		_, _ = nc.Write(ch.encode())
		return 0, 0, 0, 0, fmt.Errorf("%s: %w", statusText[ch.Status], why)
	}
	cb := ch.encode()
	if _, err := nc.Write(cb); err != nil {
		return 0, 0, 0, 0, err
	}
	proof, _, err := readHS(nc, hsProof)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	want := handshakeMAC(t.cfg.Secret, labelDialer, hb, cb)
	v := hsMsg{Version: protoVersion, Kind: hsVerdict}
	if !hmac.Equal(proof.Nonce[:], want[:]) {
		v.Status = stMAC
		_, _ = nc.Write(v.encode())
		return 0, 0, 0, 0, errors.New(statusText[stMAC])
	}
	if !kept(nc) {
		return 0, 0, 0, 0, gate.ErrCut
	}
	if !m.reserve(p, i) {
		v.Status = stDuplicate
		_, _ = nc.Write(v.encode())
		return 0, 0, 0, 0, fmt.Errorf("%s: rank %d connection %d", statusText[stDuplicate], p, i)
	}
	v.Nonce = handshakeMAC(t.cfg.Secret, labelAcceptor, hb, cb)
	if _, err := nc.Write(v.encode()); err != nil {
		m.unreserve(p, i)
		return 0, 0, 0, 0, err
	}
	return p, i, int(hello.MaxFrame), int(hello.Window), nil
}
