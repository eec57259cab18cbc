package tcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
	"math"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/internal/errs"
	"go.uber.org/goleak"
)

func closeAll(ts []*endpoint) {
	for _, tr := range ts {
		_ = tr.Close()
	}
}

// pair exchanges one message each way between ranks a and b.
func pair(ts []*endpoint, a, b int, seq uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tag := transport.Tag{Group: 6, Seq: seq}
	errc := make(chan error, 4)
	for _, d := range [][2]int{{a, b}, {b, a}} {
		want := bytes.Repeat([]byte{byte(d[0]*7 + d[1])}, 5000)
		go func() { errc <- ts[d[0]].Send(ctx, d[1], tag, want) }()
		go func() {
			got := make([]byte, len(want))
			err := ts[d[1]].Recv(ctx, d[0], tag, got)
			if err == nil && !bytes.Equal(got, want) {
				err = errors.New("wrong bytes")
			}
			errc <- err
		}()
	}
	for range 4 {
		if err := <-errc; err != nil {
			return fmt.Errorf("ranks %d and %d: %w", a, b, err)
		}
	}
	return nil
}

// A peer that breaks the frame protocol (a declared length over MaxFrame,
// an unknown type, reserved bytes, a window overrun, a chunk of nothing,
// an abort in another rank's name) is dropped: its operations fail with
// ErrPeerLost, nothing of the declared size is allocated, and the other
// pairs go on.
func TestProtocolErrors(t *testing.T) {
	big := make([]byte, DefaultMaxFrame)
	cases := []struct {
		name string
		send func(c *conn) error
	}{
		{"oversized length", func(c *conn) error {
			return c.writeFrame(&frame{Type: fEager, Len: 0xFFFFFFFF}, nil)
		}},
		{"oversized chunk", func(c *conn) error {
			return c.writeFrame(&frame{Type: fChunk, Len: DefaultMaxFrame + 1, ID: 1}, nil)
		}},
		{"unknown type", func(c *conn) error { return c.writeFrame(&frame{Type: 99}, nil) }},
		{"reserved bytes", func(c *conn) error {
			b := (&frame{Type: fPing}).bytes()
			b[2] = 1
			_, err := c.nc.Write(b)
			return err
		}},
		{"window overrun", func(c *conn) error {
			for i := range 5 {
				if err := c.writeFrame(&frame{Type: fEager, Len: uint32(len(big)), Step: uint32(i)}, big); err != nil {
					return err
				}
			}
			return nil
		}},
		{"chunk of nothing", func(c *conn) error { return c.writeFrame(&frame{Type: fChunk, Len: 10, ID: 12345}, big[:10]) }},
		{"abort in another's name", func(c *conn) error {
			return c.writeFrame(&frame{Type: fAbort, Origin: 1, Len: 3}, []byte("abc"))
		}},
		{"credit from nowhere", func(c *conn) error { return c.writeFrame(&frame{Type: fCredit, Size: 1 << 40}, nil) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := build(t, 3, nil)
			defer closeAll(ts)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			pending := transporttest.Async(func() error {
				return ts[0].Recv(ctx, 2, transport.Tag{Group: 1}, make([]byte, 8))
			})
			time.Sleep(10 * time.Millisecond)
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			start := time.Now()
			// The peer may hang up before all is written: only its
			// reaction counts.
			_ = tc.send(ts[2].links[0].conns[0])
			err := transporttest.Await(t, pending, 5*time.Second, "recv from the faulty peer")
			if !errors.Is(err, transport.ErrPeerLost) || !strings.Contains(err.Error(), "protocol error") {
				t.Fatalf("got %v, want ErrPeerLost for a protocol error", err)
			}
			t.Logf("%v after %v", err, time.Since(start).Round(time.Microsecond))
			runtime.ReadMemStats(&ms)
			if grew := ms.TotalAlloc - before; grew > 64<<20 {
				t.Errorf("allocated %d bytes meanwhile", grew)
			}
			if s := ts[0].Stats(); s.ProtocolErrors != 1 || s.PeersLost != 1 {
				t.Errorf("stats %+v", s)
			}
			if err := ts[0].Send(ctx, 2, transport.Tag{Group: 2}, []byte{1}); !errors.Is(err, transport.ErrPeerLost) {
				t.Errorf("later send to the faulty peer: %v", err)
			}
			for _, p := range [][2]int{{0, 1}, {1, 2}} {
				if err := pair(ts, p[0], p[1], 1); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A peer whose process vanishes (its sockets reset, no goodbye) fails the
// pending operations involving it at once, and the later ones; the other
// ranks go on. PeerTimeout is longer than the test: a loss found by the
// heartbeat's silence check instead of the connections' end would say
// "silent", and an operation nothing failed would end at its deadline.
func TestPeerVanishes(t *testing.T) {
	ts := build(t, 3, func(c *Config) { c.PeerTimeout, c.HeartbeatInterval = 30*time.Second, msg.DefaultPeerTimeout/4 })
	defer closeAll(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var pend []<-chan error
	for r := range 2 {
		pend = append(pend,
			transporttest.Async(func() error { return ts[r].Recv(ctx, 2, transport.Tag{Group: 3, Seq: 1}, make([]byte, 4)) }),
			transporttest.Async(func() error { return ts[r].Send(ctx, 2, transport.Tag{Group: 3, Seq: 2}, make([]byte, 8<<20)) }))
	}
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	for _, c := range ts[2].links[0].conns {
		_ = c.nc.(*net.TCPConn).SetLinger(0)
		_ = c.nc.Close()
	}
	for _, c := range ts[2].links[1].conns {
		_ = c.nc.Close()
	}
	for i, ch := range pend {
		err := transporttest.Await(t, ch, 90*time.Second, "pending op")
		if !errors.Is(err, transport.ErrPeerLost) || strings.Contains(err.Error(), "silent") || errors.Is(err, transport.ErrTimeout) {
			t.Fatalf("op %d: got %v, want ErrPeerLost for the connections' end (not silence, not the deadline)", i, err)
		}
	}
	t.Logf("pending ops failed after %v", time.Since(start))
	for r := range 2 {
		if err := ts[r].Recv(ctx, 2, transport.Tag{Group: 3, Seq: 3}, nil); !errors.Is(err, transport.ErrPeerLost) {
			t.Errorf("rank %d later recv: %v", r, err)
		}
	}
	if err := pair(ts, 0, 1, 1); err != nil {
		t.Fatal(err)
	}
}

// An idle rank notices a vanished peer too: its heartbeat reads the
// connection's end, and the first operation fails at once with that loss.
// PeerTimeout is longer than the test, so the loss cannot come by silence;
// a Recv that did not see it would end at its deadline.
func TestPeerVanishesIdle(t *testing.T) {
	ts := build(t, 2, func(c *Config) { c.PeerTimeout, c.HeartbeatInterval = 30*time.Second, 100*time.Millisecond })
	defer closeAll(ts)
	for _, c := range ts[1].links[0].conns {
		_ = c.nc.Close()
	}
	// A few heartbeats suffice; the bound only stops a rank that never
	// notices, well before PeerTimeout.
	deadline := time.Now().Add(20 * time.Second)
	for ts[0].Stats().PeersLost == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if ts[0].Stats().PeersLost != 1 {
		t.Fatal("idle rank did not notice its peer's end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := ts[0].Recv(ctx, 1, transport.Tag{}, nil)
	if !errors.Is(err, transport.ErrPeerLost) || strings.Contains(err.Error(), "silent") || errors.Is(err, transport.ErrTimeout) {
		t.Fatalf("got %v, want ErrPeerLost for the connection's end (not silence, not the deadline)", err)
	}
}

// proxy forwards TCP connections to target until frozen: then it stops
// reading and writing while keeping the sockets open, as a stopped
// process or a dead network would.
type proxy struct {
	ln     net.Listener
	target string
	frozen atomic.Bool
	closed atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				_ = a.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, a, b)
			p.mu.Unlock()
			p.wg.Add(2)
			go p.pump(a, b)
			go p.pump(b, a)
		}
	}()
	return p
}

func (p *proxy) pump(src, dst net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		for p.frozen.Load() {
			if p.closed.Load() {
				return
			}
			time.Sleep(time.Millisecond)
		}
		n, err := src.Read(buf)
		if n > 0 {
			for p.frozen.Load() && !p.closed.Load() {
				time.Sleep(time.Millisecond)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

func (p *proxy) Close() {
	p.closed.Store(true)
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A peer that falls silent (stopped process, dead network: its sockets
// stay open) is lost within PeerTimeout and a few heartbeats: pending
// operations (a Recv, a Send blocked in a full socket) and later ones fail
// with ErrPeerLost; an idle rank notices too.
func TestSilentPeer(t *testing.T) {
	const n = 3
	const timeout = 400 * time.Millisecond
	ls, addrs := listeners(t, n)
	px := newProxy(t, addrs[2])
	defer px.Close()
	dialAddrs := append([]string(nil), addrs...)
	dialAddrs[2] = px.ln.Addr().String()
	ts := make([]*endpoint, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts[r], errs[r] = connect(ctx, ls[r], Config{
				Setup: msg.Setup{Addrs: dialAddrs, Rank: r, Size: n, Group: 1, Secret: testSecret, PeerTimeout: timeout}})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	defer closeAll(ts)
	if err := exchange(t, ts, 1, 2000); err != nil {
		t.Fatal(err)
	}
	recv := transporttest.Async(func() error { return ts[0].Recv(ctx, 2, transport.Tag{Group: 4}, make([]byte, 4)) })
	send := transporttest.Async(func() error { return ts[0].Send(ctx, 2, transport.Tag{Group: 4, Seq: 1}, make([]byte, 64<<20)) })
	time.Sleep(20 * time.Millisecond)
	// The loss may not come before some connection to rank 2 has been
	// silent for PeerTimeout: not before the earliest of their last reads
	// so far, plus PeerTimeout (on the transport's clock; those reads may
	// come well before the freeze, so the freeze is no lower bound).
	earliestRead := int64(math.MaxInt64)
	for _, c := range ts[0].links[2].conns {
		earliestRead = min(earliestRead, c.lastRead.Load())
	}
	start := time.Now()
	px.frozen.Store(true)
	for _, ch := range []<-chan error{recv, send} {
		err := transporttest.Await(t, ch, 90*time.Second, "op with a silent peer")
		if !errors.Is(err, transport.ErrPeerLost) || !strings.Contains(err.Error(), "silent") {
			t.Fatalf("got %v, want ErrPeerLost (silent)", err)
		}
	}
	el := time.Since(start)
	t.Logf("silent peer lost after %v (PeerTimeout %v)", el, timeout)
	if quiet := time.Duration(ts[0].links[2].now() - earliestRead); quiet <= timeout {
		t.Errorf("silent peer lost %v after its last read, before PeerTimeout %v", quiet, timeout)
	}
	// The time is the point here: the loss must come from PeerTimeout, not
	// from TCP's own timeouts or the context. The bound is ten times
	// PeerTimeout because a heartbeat that comes late (a loaded machine)
	// skips its judgement, so the loss may come several heartbeats late; it
	// still fails a silence check that ignores PeerTimeout.
	if el > 10*timeout {
		t.Errorf("silent peer lost after %v, want within a few heartbeats of PeerTimeout %v", el, timeout)
	}
	// Rank 1 had nothing pending with rank 2: it notices all the same (its
	// Recv below waits for that, up to the context's deadline).
	deadline := time.Now().Add(5 * timeout)
	for ts[1].Stats().PeersLost == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := ts[1].Recv(ctx, 2, transport.Tag{Group: 4, Seq: 2}, nil); !errors.Is(err, transport.ErrPeerLost) {
		t.Fatalf("idle rank: %v", err)
	}
	if err := pair(ts, 0, 1, 9); err != nil {
		t.Fatal(err)
	}
}

// TestIdlePeerKept is the silence check's false-positive twin: ranks that
// send nothing for several PeerTimeouts keep each other, as the heartbeat
// pings every connection and reads them, and the pair works afterwards.
func TestIdlePeerKept(t *testing.T) {
	const timeout = time.Second
	ts := build(t, 3, func(c *Config) { c.PeerTimeout, c.ConnsPerPeer = timeout, 2 })
	defer closeAll(ts)
	time.Sleep(4 * timeout)
	for r, tr := range ts {
		if s := tr.Stats(); s.PeersLost != 0 || s.ProtocolErrors != 0 {
			t.Errorf("rank %d after an idle spell: %+v", r, s)
		}
	}
	if err := exchange(t, ts, 1, 100); err != nil {
		t.Fatal(err)
	}
}

// An abort's cause crosses the wire as text and a code: the peer's error
// matches ErrAborted and the cause's sentinels (a shape mismatch stays a
// shape mismatch), names the origin and keeps the text.
func TestAbortCauseCrossesTheWire(t *testing.T) {
	ts := build(t, 3, nil)
	defer closeAll(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	causes := []struct {
		cause error
		is    []error
		isNot []error
	}{
		{fmt.Errorf("allreduce rank 2: ranks disagree: count 7 vs 8: %w: %w", errs.ErrShapeMismatch, errs.ErrMismatch),
			[]error{errs.ErrShapeMismatch, errs.ErrMismatch, transport.ErrAborted}, []error{errs.ErrPeerLost, errs.ErrTimeout}},
		{fmt.Errorf("recv rank 2: %w", transport.CtxError(expired())),
			[]error{errs.ErrTimeout, context.DeadlineExceeded}, []error{errs.ErrShapeMismatch}},
		{errors.New("plain"), nil, []error{errs.ErrMismatch, errs.ErrTimeout}},
	}
	for i, c := range causes {
		tag := transport.Tag{Group: 8, Seq: uint64(i), Step: 3}
		pend := transporttest.Async(func() error { return ts[0].Recv(ctx, 1, tag, make([]byte, 4)) })
		time.Sleep(5 * time.Millisecond)
		ts[2].Abort(transport.Tag{Group: 8, Seq: uint64(i)}, c.cause)
		err := transporttest.Await(t, pend, 2*time.Second, "aborted recv")
		var ae *transport.AbortError
		if !errors.As(err, &ae) || ae.Origin != 2 || ae.Group != 8 || ae.Seq != uint64(i) {
			t.Fatalf("cause %d: got %v, want an AbortError from rank 2", i, err)
		}
		if ae.Cause.Error() != c.cause.Error() {
			t.Errorf("cause text %q, want %q", ae.Cause.Error(), c.cause.Error())
		}
		for _, s := range append(c.is, transport.ErrAborted) {
			if !errors.Is(err, s) {
				t.Errorf("cause %d: %v does not match %v", i, err, s)
			}
		}
		for _, s := range c.isNot {
			if errors.Is(err, s) {
				t.Errorf("cause %d: %v matches %v", i, err, s)
			}
		}
	}
}

func expired() context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	cancel()
	return ctx
}

// At least the last 4096 aborted collectives are remembered, on the
// aborting rank and on its peers.
func TestAbortMemory(t *testing.T) {
	ts := build(t, 2, nil)
	defer closeAll(ts)
	const k = 5000
	for s := range k {
		ts[0].Abort(transport.Tag{Group: 1, Seq: uint64(s)}, errors.New("x"))
	}
	deadline := time.Now().Add(5 * time.Second)
	for !aborted(ts[1], 0, transport.Tag{Group: 1, Seq: k - 1}) && time.Now().Before(deadline) {
		// The peer reads the ABORT frames when its heartbeat or an
		// operation wakes its reader; an operation does.
		c, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_ = ts[1].Recv(c, 0, transport.Tag{Group: 2}, nil)
		cancel()
	}
	for _, tr := range ts {
		for s := k - 4096; s < k; s += 97 {
			err := tr.Recv(context.Background(), 1-tr.Rank(), transport.Tag{Group: 1, Seq: uint64(s)}, nil)
			if !errors.Is(err, transport.ErrAborted) {
				t.Fatalf("rank %d seq %d: %v", tr.Rank(), s, err)
			}
		}
	}
}

// A receiver that posts nothing holds at most its window: eager sends stop
// when it is full and wait (bounded by their context) for the Recv; a
// send that gave up is not delivered; consumed bytes are handed back.
func TestBackpressure(t *testing.T) {
	const window = 64 << 10
	ts := build(t, 2, func(c *Config) { c.MaxBuffered = window; c.EagerMax = 8 << 10 })
	defer closeAll(ts)
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 4096) }
	sent := 0
	var timedOut transport.Tag
	for i := 0; ; i++ {
		tag := transport.Tag{Group: 2, Seq: uint64(i)}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := ts[0].Send(ctx, 1, tag, msg(i))
		cancel()
		if err != nil {
			if !errors.Is(err, transport.ErrTimeout) {
				t.Fatalf("send %d: %v", i, err)
			}
			timedOut = tag
			break
		}
		sent++
		if sent > 100 {
			t.Fatal("sends never blocked")
		}
	}
	if want := window / (4096 + tcpOverhead); sent != want {
		t.Errorf("%d sends went out before the window filled, want %d", sent, want)
	}
	time.Sleep(50 * time.Millisecond) // let the receiver read what is in flight
	// The receiver drops a peer that overruns its window.
	if s := ts[1].Stats(); s.ProtocolErrors != 0 || s.PeersLost != 0 {
		t.Errorf("receiver: %+v", s)
	}
	c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if err := ts[1].Recv(c, 0, timedOut, make([]byte, 4096)); !errors.Is(err, transport.ErrTimeout) {
		t.Errorf("the send that gave up was delivered: %v", err)
	}
	cancel()
	for i := range sent {
		got := make([]byte, 4096)
		if err := ts[1].Recv(context.Background(), 0, transport.Tag{Group: 2, Seq: uint64(i)}, got); err != nil || !bytes.Equal(got, msg(i)) {
			t.Fatalf("recv %d: %v", i, err)
		}
	}
	// The window comes back: eager sends go out again.
	deadline := time.Now().Add(2 * time.Second)
	for {
		c, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := ts[0].Send(c, 1, transport.Tag{Group: 3}, msg(1))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("eager sends never resumed: %v", err)
		}
	}
}

// aborted reports whether tag's collective is aborted on tr: a Recv from
// peer fails at once with ErrAborted.
func aborted(tr *endpoint, peer int, tag transport.Tag) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	return errors.Is(tr.Recv(ctx, peer, tag, nil), transport.ErrAborted)
}

// received is how many bytes tr has read from peer's connections.
func received(tr *endpoint, peer int) int64 {
	n := int64(0)
	for _, c := range tr.links[peer].conns {
		n += c.rx.Load()
	}
	return n
}

// waitArriving calls cancel once part of a large message from peer
// arrived (more than a frame header and a few control frames since it was
// called), or once stop is closed.
func waitArriving(tr *endpoint, peer int, cancel func(), stop <-chan struct{}) {
	defer cancel()
	base := received(tr, peer)
	for received(tr, peer)-base < 4096 {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Microsecond):
		}
	}
}

// A Recv that ends while its message streams in returns at once and its
// buffer is left alone afterwards; the message is consumed and the pair
// goes on.
func TestRecvEndsMidMessage(t *testing.T) {
	ts := build(t, 2, func(c *Config) { c.MaxFrame = 64 << 10 })
	defer closeAll(ts)
	const size = 64 << 20
	data := bytes.Repeat([]byte{7}, size)
	for attempt := range 10 {
		tag := transport.Tag{Group: 4, Seq: uint64(attempt)}
		send := transporttest.Async(func() error { return ts[0].Send(context.Background(), 1, tag, data) })
		ctx, cancel := context.WithCancel(context.Background())
		into := make([]byte, size)
		stop := make(chan struct{})
		go waitArriving(ts[1], 0, cancel, stop)
		start := time.Now()
		err := ts[1].Recv(ctx, 0, tag, into)
		el := time.Since(start)
		close(stop)
		snapshot := append([]byte(nil), into...)
		if serr := transporttest.Await(t, send, 10*time.Second, "send"); serr != nil {
			t.Fatalf("send: %v", serr)
		}
		if err == nil {
			continue // it all arrived first; try again
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
		if !bytes.Equal(into, snapshot) {
			t.Fatal("the buffer changed after Recv returned")
		}
		t.Logf("attempt %d: recv ended after %v with %d bytes in", attempt, el, bytes.Count(snapshot, []byte{7}))
		if err := pair(ts, 0, 1, 1); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Skip("every message arrived before the Recv could end")
}

// A Send that ends while its message streams out withdraws it: the Recv
// stays posted and takes the next message of its tag.
func TestSendEndsMidMessage(t *testing.T) {
	ts := build(t, 2, func(c *Config) { c.MaxFrame = 16 << 10 })
	defer closeAll(ts)
	const size = 64 << 20
	first := bytes.Repeat([]byte{1}, size)
	second := bytes.Repeat([]byte{2}, size)
	for attempt := range 10 {
		tag := transport.Tag{Group: 5, Seq: uint64(attempt)}
		into := make([]byte, size)
		recv := transporttest.Async(func() error { return ts[1].Recv(context.Background(), 0, tag, into) })
		ctx, cancel := context.WithCancel(context.Background())
		stop := make(chan struct{})
		go waitArriving(ts[1], 0, cancel, stop)
		err := ts[0].Send(ctx, 1, tag, first)
		close(stop)
		if err == nil {
			if rerr := transporttest.Await(t, recv, 10*time.Second, "recv"); rerr != nil || into[0] != 1 {
				t.Fatalf("recv: %v", rerr)
			}
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("send: %v", err)
		}
		if err := ts[0].Send(context.Background(), 1, tag, second); err != nil {
			t.Fatalf("second send: %v", err)
		}
		if err := transporttest.Await(t, recv, 10*time.Second, "recv"); err != nil {
			t.Fatalf("recv: %v", err)
		}
		if !bytes.Equal(into, second) {
			t.Fatal("the Recv did not get the second message")
		}
		return
	}
	t.Skip("every message went out before the Send could end")
}

// A large message of one tag whose Recv is not posted does not hold up
// another tag on the same connection.
func TestNoHeadOfLine(t *testing.T) {
	ts := build(t, 2, nil)
	defer closeAll(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, b := transport.Tag{Group: 1, Seq: 1}, transport.Tag{Group: 1, Seq: 2}
	big := transporttest.Async(func() error { return ts[0].Send(ctx, 1, a, make([]byte, 32<<20)) })
	small := transporttest.Async(func() error { return ts[0].Send(ctx, 1, b, []byte{9}) })
	got := make([]byte, 1)
	if err := ts[1].Recv(ctx, 0, b, got); err != nil || got[0] != 9 {
		t.Fatalf("small recv: %v", err)
	}
	if err := transporttest.Await(t, small, time.Second, "small send"); err != nil {
		t.Fatal(err)
	}
	if err := ts[1].Recv(ctx, 0, a, make([]byte, 32<<20)); err != nil {
		t.Fatal(err)
	}
	if err := transporttest.Await(t, big, 10*time.Second, "big send"); err != nil {
		t.Fatal(err)
	}
}

// Close with operations in flight ends them and every goroutine.
func TestCloseLeavesNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ts := build(t, 3, func(c *Config) { c.ConnsPerPeer = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pend []<-chan error
	for r := range 3 {
		peer := (r + 1) % 3
		pend = append(pend,
			transporttest.Async(func() error { return ts[r].Recv(ctx, peer, transport.Tag{Group: 1}, make([]byte, 4)) }),
			transporttest.Async(func() error { return ts[r].Send(ctx, peer, transport.Tag{Group: 2}, make([]byte, 16<<20)) }))
	}
	time.Sleep(20 * time.Millisecond)
	closeAll(ts)
	for _, ch := range pend {
		err := transporttest.Await(t, ch, 2*time.Second, "op at close")
		if !errors.Is(err, transport.ErrClosed) && !errors.Is(err, transport.ErrPeerLost) {
			t.Fatalf("got %v", err)
		}
	}
}

// A rank that never comes makes Connect fail within its context, naming
// the missing rank, and leaves nothing behind.
func TestConnectTimeout(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ls, addrs := listeners(t, 3)
	_ = ls[2].Close() // rank 2 never comes
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := connect(ctx, ls[r], Config{Setup: msg.Setup{Addrs: addrs, Rank: r, Size: 3, Group: 1, Secret: testSecret}})
			if tr != nil {
				_ = tr.Close()
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if !errors.Is(err, transport.ErrTimeout) || !strings.Contains(err.Error(), "rank 2") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestConfigChecks(t *testing.T) {
	good := Config{Setup: msg.Setup{Addrs: []string{"a:1", "b:2"}, Rank: 0, Size: 2, Secret: testSecret}}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Rank = 2 },
		func(c *Config) { c.Addrs = c.Addrs[:1] },
		func(c *Config) { c.Secret = []byte("short") },
		func(c *Config) { c.MaxFrame = 100 },
		func(c *Config) { c.ConnsPerPeer = 1000 },
		func(c *Config) { c.PeerTimeout = time.Second; c.HeartbeatInterval = time.Second },
		func(c *Config) { c.Peers = []int{0} },
		func(c *Config) { c.Peers = []int{2} },
		func(c *Config) { c.Peers = []int{1, 1} },
	} {
		c := good
		bad(&c)
		if _, err := c.normalize(); !errors.Is(err, transport.ErrBadArgument) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	one, err := connect(context.Background(), nil, Config{Setup: msg.Setup{Size: 1, Secret: testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	if err := one.Send(context.Background(), 0, transport.Tag{}, nil); !errors.Is(err, transport.ErrBadPeer) {
		t.Errorf("size 1: %v", err)
	}
	_ = one.Close()
}

// A Send whose write blocks (the receiver posts nothing and its socket is
// full) still returns when its context ends; a Send that returned nil is
// delivered whole, one that timed out is not delivered.
func TestSendHonoursContext(t *testing.T) {
	const size = 1 << 20
	ts := build(t, 2, func(c *Config) { c.MaxBuffered = 256 << 20; c.EagerMax = size })
	defer closeAll(ts)
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, size) }
	var failed transport.Tag
	sent := 0
	for i := 0; ; i++ {
		tag := transport.Tag{Group: 3, Seq: uint64(i)}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		start := time.Now()
		// A Send that ignored its context once its write blocked would
		// never return: the bound only catches that hang.
		err := transporttest.Await(t, transporttest.Async(func() error { return ts[0].Send(ctx, 1, tag, msg(i)) }), 30*time.Second, fmt.Sprintf("send %d", i))
		el := time.Since(start)
		cancel()
		if err != nil {
			if !errors.Is(err, transport.ErrTimeout) {
				t.Fatalf("send %d: %v", i, err)
			}
			t.Logf("send %d ended by its 20 ms context after %v", i, el)
			failed = tag
			break
		}
		sent++
		if sent == 200 {
			t.Skip("the socket never filled")
		}
	}
	t.Logf("%d MiB went out before a write blocked", sent)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range sent {
		got := make([]byte, size)
		if err := ts[1].Recv(ctx, 0, transport.Tag{Group: 3, Seq: uint64(i)}, got); err != nil || !bytes.Equal(got, msg(i)) {
			t.Fatalf("recv %d: %v", i, err)
		}
	}
	c, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := ts[1].Recv(c, 0, failed, make([]byte, size)); !errors.Is(err, transport.ErrTimeout) {
		t.Fatalf("the send that timed out was delivered: %v", err)
	}
	if err := pair(ts, 0, 1, 1); err != nil {
		t.Fatal(err)
	}
}

// With the window full, even an empty message waits for its Recv, and
// arrives.
func TestEmptyRendezvous(t *testing.T) {
	ts := build(t, 2, func(c *Config) { c.MaxBuffered = 4096 + tcpOverhead; c.EagerMax = 4096 })
	defer closeAll(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts[0].Send(ctx, 1, transport.Tag{Seq: 1}, make([]byte, 4096)); err != nil {
		t.Fatal(err) // fills the window
	}
	send := transporttest.Async(func() error { return ts[0].Send(ctx, 1, transport.Tag{Seq: 2}, nil) })
	if err := ts[1].Recv(ctx, 0, transport.Tag{Seq: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if err := transporttest.Await(t, send, 5*time.Second, "empty send"); err != nil {
		t.Fatal(err)
	}
}
