package shm

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/internal/gate"
	"golang.org/x/sys/unix"
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

// aLongTimeAgo is a deadline that wakes a blocked socket call at once.
var aLongTimeAgo = time.Unix(1, 0)

// Connect builds this rank's part of the full mesh and returns its
// endpoint once every pair is connected: it binds its rendezvous socket
// (an abstract name of Run, Group and Rank), accepts each higher rank
// there and dials each lower one (retrying until the peer listens), runs
// the handshake on each (see handshake.go), and maps each pair's region:
// the lower rank creates it after the higher proved the secret and hands
// it over the socket. Connections that fail the handshake are refused and
// counted (Stats.Refused; Config.OnRefused) and change nothing. A stranger
// costs little: a connection must send its hello within 2 s
// (HandshakeTimeout if shorter), at most 256 handshakes wait at once, and
// silent connections cannot keep a dialer that speaks out (see
// acceptLoop); the connections turned away for room are reported to
// OnRefused together, at most once a second (errors.Is gate.ErrFull). The
// rendezvous socket closes when Connect returns. ctx bounds the whole; on
// failure everything is closed and unmapped and the error names the peers
// still missing. Connect links this rank to every other one (Config.Peers
// must be nil or list them all); ConnectLinks links it to some.
func Connect(ctx context.Context, cfg Config) (*Transport, error) {
	t, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := t.start(); err != nil {
		return nil, err
	}
	return t, nil
}

// ConnectLinks links this rank to Config.Peers as Connect does, and
// returns the links, indexed by rank (nil at this rank and at the ranks
// not in Peers), for a msg.Endpoint that may hold other carriers' links
// too. Refused connections are reported to OnRefused only.
func ConnectLinks(ctx context.Context, cfg Config) ([]msg.Link, error) {
	t, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return t.ends, nil
}

func connect(ctx context.Context, cfg Config) (*Transport, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if err := supported(); err != nil {
		return nil, err
	}
	t := newTransport(cfg)
	if len(cfg.Peers) == 0 {
		return t, nil
	}
	m := &mesh{t: t, full: make(chan struct{}), need: len(cfg.Peers), taken: make(map[int]bool), errs: make(map[int]error)}
	sctx, cancel := context.WithCancel(ctx)
	var ln *net.UnixListener
	if cfg.Peers[len(cfg.Peers)-1] > cfg.Rank {
		name := sockName(cfg.Run, cfg.Group, cfg.Rank)
		ln, err = net.ListenUnix(network, &net.UnixAddr{Name: name, Net: network})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("shm: rank %d: listen on %q (a live process of this run and group holds the name?): %w",
				cfg.Rank, name, err)
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.acceptLoop(sctx, ln)
		}()
	}
	for _, p := range cfg.Peers {
		if p > cfg.Rank {
			break
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.dialLoop(sctx, p)
		}()
	}
	select {
	case <-m.full:
	case <-ctx.Done():
	}
	cancel()
	if ln != nil {
		_ = ln.Close()
	}
	m.wg.Wait()
	m.flushCrowd()
	if missing := m.missing(); missing != "" {
		cerr := transport.CtxError(ctx)
		if cerr == nil {
			cerr = errors.New("incomplete")
		}
		t.closeLinks()
		return nil, fmt.Errorf("shm: rank %d: connect: %w; not connected: %s", cfg.Rank, cerr, missing)
	}
	return t, nil
}

// mesh is the state of one Connect.
type mesh struct {
	t    *Transport
	wg   sync.WaitGroup
	full chan struct{}

	mu    sync.Mutex
	need  int
	have  int
	taken map[int]bool  // peers whose handshake passed the proof
	errs  map[int]error // last failure per peer

	crowdMu  sync.Mutex
	crowd    int       // connections turned away since the last report
	crowdAt  time.Time // the last report
	crowdWhy error     // why the last one was
}

// reserve claims peer p for an authenticated connection.
func (m *mesh) reserve(p int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.taken[p] {
		return false
	}
	m.taken[p] = true
	return true
}

func (m *mesh) unreserve(p int) {
	m.mu.Lock()
	delete(m.taken, p)
	m.mu.Unlock()
}

// attach installs peer p's socket and region.
func (m *mesh) attach(p int, nc *net.UnixConn, mem []byte, g geometry, window int, probe uint64) error {
	s, err := newSock(m.t.links[p], nc)
	if err != nil {
		return err
	}
	// Single copy from p: its process, as the kernel names it, and
	// whether this process may read its memory.
	pid := 0
	if c := m.t.cfg; c.CMAMin > 0 && probe != 0 && (!c.cmaAuto || cmaPays(c.Size)) {
		if id, err := peerPID(nc); err == nil && probeCMA(id, probe) {
			pid = id
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t.links[p].attach(s, mem, g, window)
	m.t.links[p].cmaPID = pid
	delete(m.errs, p)
	m.have++
	if m.have == m.need {
		close(m.full)
	}
	return nil
}

func (m *mesh) noteErr(p int, err error) {
	m.mu.Lock()
	m.errs[p] = err
	m.mu.Unlock()
}

// missing names the peers not connected.
func (m *mesh) missing() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, p := range m.t.links {
		if p == nil || p.sock != nil {
			continue
		}
		s := fmt.Sprintf("rank %d", p.rank)
		if e := m.errs[p.rank]; e != nil {
			s += " (" + e.Error() + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// refuse counts a refused connection and reports it to OnRefused.
func (m *mesh) refuse(err error) {
	m.t.refused.Add(1)
	if f := m.t.cfg.OnRefused; f != nil {
		f(fmt.Errorf("shm: rank %d: refused a connection: %w", m.t.rank, err))
	}
}

// turnedAway counts a connection the gate refused or cut, and reports it
// to OnRefused at once if none was reported in the last crowdEvery, else
// with the next report (or flushCrowd's).
func (m *mesh) turnedAway(err error) {
	m.t.refused.Add(1)
	m.crowdMu.Lock()
	m.crowd++
	m.crowdWhy = err
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
	n, why := m.crowd, m.crowdWhy
	m.crowd, m.crowdAt = 0, time.Now()
	m.crowdMu.Unlock()
	if f := m.t.cfg.OnRefused; f != nil && n > 0 {
		f(fmt.Errorf("shm: rank %d: refused %d connection(s): %w", m.t.rank, n, why))
	}
}

// acceptLoop accepts connections until the listener closes. Each waits
// behind one door (see gate.Door): in spoken when the dialer's hello is in
// when it is accepted, else in quiet until its hello is read, then in
// spoken. A flood of silent connections fills quiet only, and a real
// dialer, who sends its hello as soon as it connects, need not outlast
// them there.
func (m *mesh) acceptLoop(ctx context.Context, ln *net.UnixListener) {
	door := gate.NewDoor()
	for {
		nc, err := ln.AcceptUnix()
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
			m.turnedAway(err)
			continue
		}
		gu := &guest{UnixConn: nc, ctx: ctx, seat: seat}
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
				m.turnedAway(err)
			} else {
				m.refuse(err)
			}
		}()
	}
}

// helloIn reports whether a hello waits to be read on nc, reading nothing
// (one byte more than a hello is peeked: a longer message is no hello).
func helloIn(nc *net.UnixConn) bool {
	var b [hsSize + 1]byte
	if gate.Peek(nc, b[:], time.Time{}, nil) != hsSize {
		return false
	}
	_, err := decodeHS(b[:hsSize], hsHello)
	return err == nil
}

// guest is an accepted connection while its handshake runs, with its
// place behind the acceptor's door (seat), until the dialer has proved the
// secret; then it leaves the door (it is no stranger) before the verdict
// that hands it the region. Its reads wait at most firstBytesMax for the
// hello, and until the handshake's deadline after it; the end of ctx wakes
// them at once. Only the handshake's goroutine uses a guest.
type guest struct {
	*net.UnixConn
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
	_ = g.UnixConn.SetDeadline(g.end)
	_ = g.UnixConn.SetReadDeadline(now.Add(min(first, total)))
	return context.AfterFunc(g.ctx, func() { _ = g.UnixConn.SetDeadline(aLongTimeAgo) })
}

// heard is told that the hello is in: the reads get the handshake's
// deadline, and a quiet guest moves to spoken (gate.ErrCut if quiet cut
// it first; gate.ErrFull if spoken is full).
func (g *guest) heard() error {
	_ = g.UnixConn.SetReadDeadline(g.end)
	if g.ctx.Err() != nil { // ctx ended before the line above: wake it again
		_ = g.UnixConn.SetDeadline(aLongTimeAgo)
	}
	return g.seat.Heard()
}

// bound gives nc the handshake's deadline, and a deadline in the past once
// ctx ends; the returned func undoes the latter and reports whether ctx
// ended first.
func (t *Transport) bound(ctx context.Context, nc net.Conn) func() bool {
	_ = nc.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	return context.AfterFunc(ctx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
}

func (m *mesh) acceptOne(gu *guest) error {
	t, nc := m.t, gu.UnixConn
	stop := gu.start(t.cfg.HandshakeTimeout, firstBytesMax)
	h, mem, g, win, probe, err := t.acceptHandshake(gu, m)
	if !stop() && err == nil {
		err = transport.CtxError(gu.ctx)
	}
	if err == nil {
		_ = nc.SetDeadline(time.Time{})
		err = m.attach(h, nc, mem, g, win, probe)
	}
	if err != nil && mem != nil {
		unmap(mem)
		m.unreserve(h)
	}
	return err
}

// dialLoop dials peer p until the pair is connected or ctx ends.
func (m *mesh) dialLoop(ctx context.Context, p int) {
	backoff := time.Millisecond
	for {
		err := m.dialOne(ctx, p)
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
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

func (m *mesh) dialOne(ctx context.Context, p int) error {
	t := m.t
	addr := &net.UnixAddr{Name: sockName(t.cfg.Run, t.cfg.Group, p), Net: network}
	nc, err := net.DialUnix(network, nil, addr)
	if err != nil {
		return err
	}
	stop := t.bound(ctx, nc)
	mem, g, win, probe, err := t.dialHandshake(nc, p)
	if !stop() && err == nil {
		err = transport.CtxError(ctx)
	}
	if err == nil {
		_ = nc.SetDeadline(time.Time{})
		err = m.attach(p, nc, mem, g, win, probe)
	}
	if err != nil {
		unmap(mem)
		_ = nc.Close()
		return fmt.Errorf("%s: %w", addr.Name, err)
	}
	return nil
}

func nonce() [32]byte {
	var n [32]byte
	_, _ = rand.Read(n[:])
	return n
}

// ourHello is the message this rank sends as a dialer (hello) or acceptor
// (challenge) to peer.
func (t *Transport) ourHello(kind uint8, peer int) hsMsg {
	return hsMsg{
		Version:  protoVersion,
		Kind:     kind,
		Group:    t.cfg.Group,
		From:     uint32(t.rank),
		To:       uint32(peer),
		Size:     uint32(t.size),
		Window:   uint32(t.cfg.MaxBuffered),
		SlotSize: uint32(t.cfg.SlotSize),
		Slots:    uint32(t.cfg.Slots),
		Run:      runHash(t.cfg.Run),
		Nonce:    nonce(),
		Probe:    t.probeAddr(),
	}
}

// readHS reads one handshake message of kind kind.
func readHS(nc *net.UnixConn, kind uint8) (hsMsg, []byte, error) {
	b := make([]byte, hsSize+1)
	n, err := nc.Read(b)
	if err != nil {
		return hsMsg{}, nil, err
	}
	b = b[:n]
	msg, err := decodeHS(b, kind)
	return msg, b, err
}

// dialHandshake runs the dialer's side on nc: hello, challenge, proof,
// verdict (with the region), ready. It returns the mapped region and the
// peer's window.
func (t *Transport) dialHandshake(nc *net.UnixConn, p int) (mem []byte, g geometry, window int, probe uint64, err error) {
	hello := t.ourHello(hsHello, p)
	hb := hello.encode()
	if _, err := nc.Write(hb); err != nil {
		return nil, g, 0, 0, err
	}
	ch, cb, err := readHS(nc, hsChallenge)
	if err != nil { // closed unread: a full acceptor, or one that cut it, is dialled again
		return nil, g, 0, 0, fmt.Errorf("waiting for the challenge: %w", err)
	}
	if ch.Status != stOK {
		return nil, g, 0, 0, refusal(ch.Status)
	}
	switch {
	case ch.Version != protoVersion:
		return nil, g, 0, 0, fmt.Errorf("%w: version %d", errHandshake, ch.Version)
	case ch.Group != t.cfg.Group || ch.Run != hello.Run:
		return nil, g, 0, 0, fmt.Errorf("%w: group %d or run differs (want group %d)", errHandshake, ch.Group, t.cfg.Group)
	case ch.From != uint32(p) || ch.To != uint32(t.rank):
		return nil, g, 0, 0, fmt.Errorf("%w: ranks %d->%d, want %d->%d", errHandshake, ch.From, ch.To, p, t.rank)
	case ch.Size != uint32(t.size) || !windowOK(ch.Window):
		return nil, g, 0, 0, fmt.Errorf("%w: configuration differs", errHandshake)
	}
	proof := hsMsg{Version: protoVersion, Kind: hsProof, Nonce: handshakeMAC(t.cfg.Secret, labelDialer, hb, cb)}
	if _, err := nc.Write(proof.encode()); err != nil {
		return nil, g, 0, 0, err
	}
	v, fd, err := readVerdict(nc)
	if err != nil {
		return nil, g, 0, 0, err
	}
	if v.Status != stOK {
		closeFD(fd)
		return nil, g, 0, 0, refusal(v.Status)
	}
	want := handshakeMAC(t.cfg.Secret, labelAcceptor, hb, cb)
	if !hmac.Equal(v.Nonce[:], want[:]) {
		closeFD(fd)
		return nil, g, 0, 0, fmt.Errorf("%w: the peer does not know the secret", errHandshake)
	}
	if fd < 0 {
		return nil, g, 0, 0, fmt.Errorf("%w: no region with the verdict", errHandshake)
	}
	mem, g, err = mapPeerRegion(fd, int(ch.SlotSize), int(ch.Slots), t.cfg.Group, p, t.rank)
	ready := hsMsg{Version: protoVersion, Kind: hsReady}
	if err != nil {
		ready.Status = stRegion
		_, _ = nc.Write(ready.encode())
		return nil, g, 0, 0, err
	}
	if _, err := nc.Write(ready.encode()); err != nil {
		unmap(mem)
		return nil, g, 0, 0, err
	}
	return mem, g, int(ch.Window), ch.Probe, nil
}

// mapPeerRegion maps the region a lower rank handed over and checks its
// header; it closes fd.
func mapPeerRegion(fd, slotSize, slots int, group uint64, low, high int) ([]byte, geometry, error) {
	defer closeFD(fd)
	if slotSize < minSlotSize || slotSize > maxSlotSize || slotSize%64 != 0 || slots < minSlots || slots > maxSlots ||
		regionSize(slotSize, slots) > maxRegion {
		return nil, geometry{}, fmt.Errorf("region of %d slots of %d bytes out of bounds", slots, slotSize)
	}
	mem, err := openRegion(fd, regionSize(slotSize, slots))
	if err != nil {
		return nil, geometry{}, err
	}
	g, err := readHeader(mem, group, low, high)
	if err != nil {
		unmap(mem)
		return nil, g, fmt.Errorf("region: %w", err)
	}
	return mem, g, nil
}

// readVerdict reads the verdict and the descriptor that comes with it (-1
// if none).
func readVerdict(nc *net.UnixConn) (hsMsg, int, error) {
	b := make([]byte, hsSize+1)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := nc.ReadMsgUnix(b, oob)
	if err != nil {
		return hsMsg{}, -1, err
	}
	fds, err := rights(oob[:oobn])
	if err != nil {
		return hsMsg{}, -1, err
	}
	fd := -1
	for i, f := range fds {
		if i == 0 {
			fd = f
		} else {
			closeFD(f)
		}
	}
	v, err := decodeHS(b[:n], hsVerdict)
	if err == nil && len(fds) > 1 {
		err = fmt.Errorf("%w: %d descriptors with the verdict", errHandshake, len(fds))
	}
	if err != nil {
		closeFD(fd)
		return v, -1, err
	}
	return v, fd, nil
}

// rights returns the descriptors of the SCM_RIGHTS messages in oob.
func rights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message: %w", err)
	}
	var fds []int
	for i := range msgs {
		f, err := unix.ParseUnixRights(&msgs[i])
		if err == nil {
			fds = append(fds, f...)
		}
	}
	return fds, nil
}

func closeFD(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}

// acceptHandshake runs the acceptor's side on gu's connection; once the
// dialer h has proved the secret it takes gu out of the gates, reserves h,
// creates the pair's region and hands it over. It returns h, the region
// and h's window; on failure after the region was made, the region too
// (the caller unmaps it).
func (t *Transport) acceptHandshake(gu *guest, m *mesh) (h int, mem []byte, g geometry, window int, probe uint64, err error) {
	nc := gu.UnixConn
	hello, hb, err := readHS(nc, hsHello)
	if err != nil {
		return 0, nil, g, 0, 0, err
	}
	if err := gu.heard(); err != nil {
		return 0, nil, g, 0, 0, err
	}
	h = int(hello.From)
	ch := t.ourHello(hsChallenge, h)
	var why error
	switch {
	case hello.Version != protoVersion:
		ch.Status, why = stVersion, fmt.Errorf("version %d", hello.Version)
	case hello.Group != t.cfg.Group || hello.Run != ch.Run:
		ch.Status, why = stGroup, fmt.Errorf("group %d or run differs (a rank of another run?)", hello.Group)
	case hello.To != uint32(t.rank) || hello.From <= uint32(t.rank) || hello.From >= uint32(t.size) || t.links[hello.From] == nil:
		ch.Status, why = stRank, fmt.Errorf("ranks %d->%d", hello.From, hello.To)
	case hello.Size != uint32(t.size) || !windowOK(hello.Window):
		ch.Status, why = stConfig, errors.New("configuration differs")
	}
	if why != nil {
		ch.Nonce = [32]byte{}
		_, _ = nc.Write(ch.encode())
		return 0, nil, g, 0, 0, fmt.Errorf("%s: %w", statusText[ch.Status], why)
	}
	cb := ch.encode()
	if _, err := nc.Write(cb); err != nil {
		return 0, nil, g, 0, 0, err
	}
	proof, _, err := readHS(nc, hsProof)
	if err != nil {
		return 0, nil, g, 0, 0, err
	}
	want := handshakeMAC(t.cfg.Secret, labelDialer, hb, cb)
	v := hsMsg{Version: protoVersion, Kind: hsVerdict}
	if !hmac.Equal(proof.Nonce[:], want[:]) {
		v.Status = stMAC
		_, _ = nc.Write(v.encode())
		return 0, nil, g, 0, 0, errors.New(statusText[stMAC])
	}
	if !gu.seat.Keep() {
		return 0, nil, g, 0, 0, gate.ErrCut
	}
	if !m.reserve(h) {
		v.Status = stDuplicate
		_, _ = nc.Write(v.encode())
		return 0, nil, g, 0, 0, fmt.Errorf("%s: rank %d", statusText[stDuplicate], h)
	}
	g = geometry{slotSize: t.cfg.SlotSize, slots: t.cfg.Slots, group: t.cfg.Group, low: t.rank, high: h}
	f, mem, err := newRegion(regionSize(g.slotSize, g.slots))
	if err != nil {
		m.unreserve(h)
		v.Status = stRegion
		_, _ = nc.Write(v.encode())
		return 0, nil, g, 0, 0, err
	}
	writeHeader(mem, g)
	v.Nonce = handshakeMAC(t.cfg.Secret, labelAcceptor, hb, cb)
	_, _, err = nc.WriteMsgUnix(v.encode(), unix.UnixRights(int(f.Fd())), nil)
	_ = f.Close()
	if err != nil {
		return h, mem, g, 0, 0, err
	}
	r, _, err := readHS(nc, hsReady)
	if err == nil && r.Status != stOK {
		err = refusal(r.Status)
	}
	if err != nil {
		return h, mem, g, 0, 0, err
	}
	return h, mem, g, int(hello.Window), hello.Probe, nil
}
