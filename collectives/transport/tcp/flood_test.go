package tcp

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/internal/gate"
)

// flood keeps n silent connections open to addr until ctx ends, dialling
// each again as soon as the listener closes it (and again and again while
// nothing listens there). The returned func waits for the flood to end
// and reports how many connections it made; made counts them as they come.
func flood(ctx context.Context, addr string, n int, made *atomic.Uint64) (wait func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d net.Dialer
			pause := time.Millisecond
			one := make([]byte, 1)
			for ctx.Err() == nil {
				nc, err := d.DialContext(ctx, "tcp", addr)
				if err != nil { // not listening (yet, or any more)
					select {
					case <-ctx.Done():
					case <-time.After(pause):
					}
					pause = min(2*pause, 50*time.Millisecond)
					continue
				}
				pause = time.Millisecond
				made.Add(1)
				stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
				_, _ = nc.Read(one) // says nothing; returns once closed
				stop()
				_ = nc.Close()
			}
		}()
	}
	return wg.Wait
}

// connectAll runs Connect on every listener at once and reports how long
// the slowest took.
func connectAll(ctx context.Context, ls []*Listener, tweak func(*Config)) ([]*Transport, []error, time.Duration) {
	n := len(ls)
	addrs := make([]string, n)
	for r, l := range ls {
		addrs[r] = l.Addr()
	}
	ts := make([]*Transport, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for r := range n {
		cfg := Config{Rank: r, Size: n, Group: 77, Addrs: addrs, Secret: testSecret}
		if tweak != nil {
			tweak(&cfg)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts[r], errs[r] = ls[r].Connect(ctx, cfg)
		}()
	}
	wg.Wait()
	return ts, errs, time.Since(start)
}

// closeMade closes the transports that were made.
func closeMade(ts []*Transport) {
	for _, tr := range ts {
		if tr != nil {
			_ = tr.Close()
		}
	}
}

// TestFloodDoesNotKeepPeersOut: while three ranks connect, 300 silent
// connections are held open to each listening rank, each dialled again as
// soon as it is closed. The mesh forms, and soon: within twice the time the
// same group took without the flood, or that time and four seconds,
// whichever is longer. Forming a mesh on loopback takes milliseconds, so
// twice that alone would measure the scheduler, not the listener; and the
// flood runs in this process, so its 600 goroutines and the acceptors'
// churn (thousands of connections accepted, cut and dialled again a
// second) take CPU from the ranks: on a 2-core machine under -race, with
// other builds and two busy loops beside it (load 8 to 13), the mesh
// formed in 0.1 to 2.3 s under the flood. When silent connections could
// fill every handshake slot, a flood kept the peers out for the whole
// join timeout.
func TestFloodDoesNotKeepPeersOut(t *testing.T) {
	const n, strangers = 3, 300
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	ls, _ := listeners(t, n)
	ts, errs, unflooded := connectAll(ctx, ls, nil)
	closeMade(ts)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("without the flood, rank %d: %v", r, err)
		}
	}

	ls, addrs := listeners(t, n)
	fctx, stopFlood := context.WithCancel(ctx)
	var made atomic.Uint64
	var waits []func()
	for r := 1; r < n; r++ { // rank 0 only dials
		waits = append(waits, flood(fctx, addrs[r], strangers, &made))
	}
	defer func() {
		stopFlood()
		for _, w := range waits {
			w()
		}
	}()
	// The flood is in every listener's backlog before the ranks start.
	for made.Load() < uint64((n-1)*strangers) {
		if ctx.Err() != nil {
			t.Fatalf("the flood made only %d connections", made.Load())
		}
		time.Sleep(time.Millisecond)
	}
	before := made.Load()
	ts, errs, flooded := connectAll(ctx, ls, nil)
	during := made.Load() - before
	defer closeMade(ts)
	for r, err := range errs {
		if err != nil {
			t.Errorf("under the flood, rank %d: %v", r, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	var refused uint64
	for _, tr := range ts {
		refused += tr.Stats().Refused
	}
	t.Logf("mesh formed in %v without the flood, %v under it (%d strangers dialled meanwhile, %d refused)",
		unflooded, flooded, during, refused)
	if bound := max(2*unflooded, unflooded+4*time.Second); flooded > bound {
		t.Errorf("under the flood the mesh took %v, over %v (%v without it)", flooded, bound, unflooded)
	}
	if refused == 0 {
		t.Error("no stranger was refused: the flood never reached the listeners")
	}
	stopFlood()
	if err := exchange(t, ts, 1, 5000); err != nil {
		t.Fatalf("after the flood: %v", err)
	}
}

// acceptAlone runs rank 1 of a group of two, whose rank 0 the test plays
// by hand; it returns rank 0's address book and where rank 1's Connect
// reports.
func acceptAlone(t *testing.T, ctx context.Context, tweak func(*Config)) (Config, <-chan result) {
	t.Helper()
	ls, addrs := listeners(t, 2)
	_ = ls[0].Close() // rank 0 only dials
	cfg := Config{Rank: 1, Size: 2, Group: 77, Addrs: addrs, Secret: testSecret, ConnsPerPeer: 1}
	if tweak != nil {
		tweak(&cfg)
	}
	out := make(chan result, 1)
	go func(cfg Config) {
		tr, err := ls[1].Connect(ctx, cfg)
		out <- result{tr, err}
	}(cfg)
	cfg.Rank = 0
	return cfg, out
}

type result struct {
	t   *Transport
	err error
}

// TestSlowHelloGetsIn is the flood test's false-positive twin: a real
// peer on a loaded machine may connect and then say nothing for a while.
// One silent for far longer than a handshake slot's minimum age, but
// within the first-byte deadline, at a listener nobody floods, is neither
// cut nor timed out: it gets in, and the pair works.
func TestSlowHelloGetsIn(t *testing.T) {
	const silence = time.Second
	if silence < 10*gate.DefaultMinAge || silence > firstBytesMax/2 {
		t.Fatalf("silence %v does not sit between the slot's minimum age %v and the first-byte deadline %v",
			silence, gate.DefaultMinAge, firstBytesMax)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var refused atomic.Int64
	cfg, acc := acceptAlone(t, ctx, func(c *Config) { c.OnRefused = func(error) { refused.Add(1) } })

	// Rank 0 as dialOne, but silent for a while once connected.
	n0, err := cfg.normalize()
	if err != nil {
		t.Fatal(err)
	}
	t0 := newTransport(n0)
	m0 := &mesh{t: t0, full: make(chan struct{}), errs: map[int]error{}, need: 1}
	nc, err := net.Dial("tcp", cfg.Addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(silence)
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	mf, win, err := t0.dialHandshake(nc, 1, 0)
	if err != nil {
		_ = nc.Close()
		t.Fatalf("a peer silent for %v was refused: %v", silence, err)
	}
	_ = nc.SetDeadline(time.Time{})
	if !m0.attach(1, 0, nc, mf, win) {
		t.Fatal("rank 0 could not attach its connection")
	}
	if err := t0.start(); err != nil {
		t.Fatal(err)
	}
	defer t0.Close()
	r := <-acc
	if r.err != nil {
		t.Fatalf("rank 1: %v", r.err)
	}
	defer r.t.Close()
	if n := refused.Load(); n != 0 {
		t.Errorf("%d connections refused, want none", n)
	}
	if err := exchange(t, []*Transport{t0, r.t}, 1, 1000); err != nil {
		t.Fatal(err)
	}
}

// TestSilentStrangerLeavesEarly: a connection that says nothing is closed
// at the first-byte deadline, long before the handshake's own timeout, and
// refused as timed out.
func TestSilentStrangerLeavesEarly(t *testing.T) {
	const handshake = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*handshake)
	defer cancel()
	why := make(chan error, 8)
	cfg, acc := acceptAlone(t, ctx, func(c *Config) {
		c.HandshakeTimeout = handshake
		c.OnRefused = func(err error) {
			select {
			case why <- err:
			default:
			}
		}
	})
	nc, err := net.Dial("tcp", cfg.Addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	_ = nc.SetReadDeadline(start.Add(handshake))
	n, err := nc.Read(make([]byte, 1))
	waited := time.Since(start)
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("after %v a silent connection read %d bytes, %v; want the acceptor's close", waited, n, err)
	}
	if waited < firstBytesMax-100*time.Millisecond {
		t.Errorf("a silent connection was closed after %v, before the first-byte deadline %v", waited, firstBytesMax)
	}
	select {
	case err := <-why:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("refused as %v, want a deadline", err)
		}
	case <-time.After(handshake):
		t.Error("the silent connection was not refused")
	}
	t.Logf("a silent connection was closed after %v (handshake timeout %v)", waited, handshake)
	cancel()
	if r := <-acc; r.err == nil {
		_ = r.t.Close()
		t.Error("rank 1 connected without rank 0")
	}
}
