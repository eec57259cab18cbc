package shm

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

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/gate"
)

// flood keeps n silent connections open to the rendezvous socket name
// until ctx ends, dialling each again as soon as the listener closes it
// (and again and again while nothing listens there); made counts the
// connections it made, per flood. The returned func waits for its end.
func flood(ctx context.Context, name string, n int, made *atomic.Uint64) (wait func()) {
	addr := &net.UnixAddr{Name: name, Net: network}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pause := time.Millisecond
			one := make([]byte, 1)
			for ctx.Err() == nil {
				nc, err := net.DialUnix(network, nil, addr)
				if err != nil { // not listening (yet, or any more), or its backlog is full
					select {
					case <-ctx.Done():
					case <-time.After(pause):
					}
					pause = min(2*pause, 20*time.Millisecond)
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

// connectInTurn starts the ranks of a fresh run one after the other,
// calling settle(r) after each rank r that listens, and reports how long
// the group took to connect from the start of its last rank.
func connectInTurn(ctx context.Context, run string, n int, settle func(r int)) ([]*Transport, []error, time.Duration) {
	ts := make([]*Transport, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	var start time.Time
	for r := range n {
		cfg := Config{Rank: r, Size: n, Group: 77, Run: run, Secret: testSecret}
		start = time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts[r], errs[r] = Connect(ctx, cfg)
		}()
		if r < n-1 && settle != nil {
			settle(r)
		}
	}
	wg.Wait()
	return ts, errs, time.Since(start)
}

// TestFloodDoesNotKeepPeersOut: while three ranks connect, 300 silent
// connections are held open to each rank's rendezvous socket, each
// dialled again as soon as it is closed. The ranks start in turn, each
// once the flood fills the socket of the one before, so every pair meets
// under the flood. The group connects, and soon: within twice the time
// it took from its last rank's start without the flood, or that time and
// four seconds, whichever is longer. Connecting takes milliseconds, so
// twice that alone would measure the scheduler, not the listener; and the
// flood runs in this process, so its 600 goroutines and the acceptors'
// churn (thousands of connections accepted, cut and dialled again a
// second) take CPU from the ranks: on a 2-core machine under -race, with
// other builds and two busy loops beside it (load 8 to 13), the group
// connected in 0.3 to 2.7 s under the flood. When silent connections
// could fill every handshake slot, a flood kept the peers out for the
// whole join timeout.
func TestFloodDoesNotKeepPeersOut(t *testing.T) {
	needShm(t)
	const n, strangers = 3, 300
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	ts, errs, unflooded := connectInTurn(ctx, testRun(t), n, nil)
	closeAll(ts)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("without the flood, rank %d: %v", r, err)
		}
	}

	run := testRun(t)
	fctx, stopFlood := context.WithCancel(ctx)
	made := make([]atomic.Uint64, n)
	var waits []func()
	for r := range n - 1 { // the last rank only dials
		waits = append(waits, flood(fctx, sockName(run, 77, r), strangers, &made[r]))
	}
	defer func() {
		stopFlood()
		for _, w := range waits {
			w()
		}
	}()
	var before uint64
	ts, errs, flooded := connectInTurn(ctx, run, n, func(r int) {
		for made[r].Load() < strangers && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		if r == n-2 {
			for i := range made {
				before += made[i].Load()
			}
		}
	})
	var during uint64
	for i := range made {
		during += made[i].Load()
	}
	during -= before
	defer closeAll(ts)
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
	t.Logf("the group connected in %v without the flood, %v under it (%d strangers dialled meanwhile, %d refused in all)",
		unflooded, flooded, during, refused)
	if bound := max(2*unflooded, unflooded+4*time.Second); flooded > bound {
		t.Errorf("under the flood the group took %v, over %v (%v without it)", flooded, bound, unflooded)
	}
	if refused == 0 {
		t.Error("no stranger was refused: the flood never reached the sockets")
	}
	stopFlood()
	if err := exchangeAll(ctx, ts); err != nil {
		t.Fatalf("after the flood: %v", err)
	}
}

// exchangeAll sends one message between every ordered pair of ranks.
func exchangeAll(ctx context.Context, ts []*Transport) error {
	errc := make(chan error, 2*len(ts)*len(ts))
	var wg sync.WaitGroup
	for s := range ts {
		for d := range ts {
			if s == d {
				continue
			}
			tag := transport.Tag{Group: 1, Step: uint32(s*len(ts) + d)}
			wg.Add(2)
			go func() {
				defer wg.Done()
				errc <- ts[s].Send(ctx, d, tag, []byte{byte(s), byte(d)})
			}()
			go func() {
				defer wg.Done()
				got := make([]byte, 2)
				err := ts[d].Recv(ctx, s, tag, got)
				if err == nil && (got[0] != byte(s) || got[1] != byte(d)) {
					err = errors.New("wrong bytes")
				}
				errc <- err
			}()
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			return err
		}
	}
	return nil
}

type result struct {
	t   *Transport
	err error
}

// acceptAlone runs rank 0 of a group of two, whose rank 1 the test plays
// by hand; it returns rank 1's configuration and where rank 0's Connect
// reports.
func acceptAlone(t *testing.T, ctx context.Context, tweak func(*Config)) (Config, <-chan result) {
	t.Helper()
	needShm(t)
	cfg := Config{Rank: 0, Size: 2, Group: 77, Run: testRun(t), Secret: testSecret}
	if tweak != nil {
		tweak(&cfg)
	}
	out := make(chan result, 1)
	go func(cfg Config) {
		tr, err := Connect(ctx, cfg)
		out <- result{tr, err}
	}(cfg)
	cfg.Rank = 1
	return cfg, out
}

// dialAlone dials rank 0's rendezvous socket until it listens.
func dialAlone(t *testing.T, ctx context.Context, cfg Config) *net.UnixConn {
	t.Helper()
	addr := &net.UnixAddr{Name: sockName(cfg.Run, cfg.Group, 0), Net: network}
	for {
		nc, err := net.DialUnix(network, nil, addr)
		if err == nil {
			return nc
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSlowHelloGetsIn is the flood test's false-positive twin: a real
// peer on a loaded machine may connect and then say nothing for a while.
// One silent for far longer than a handshake slot's minimum age, but
// within the first-byte deadline, at a socket nobody floods, is neither
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

	// Rank 1 as dialOne, but silent for a while once connected.
	n1, err := cfg.normalize()
	if err != nil {
		t.Fatal(err)
	}
	t1 := newTransport(n1)
	m1 := &mesh{t: t1, full: make(chan struct{}), need: 1, taken: map[int]bool{}, errs: map[int]error{}}
	nc := dialAlone(t, ctx, cfg)
	time.Sleep(silence)
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	mem, g, win, probe, err := t1.dialHandshake(nc, 0)
	if err != nil {
		_ = nc.Close()
		t.Fatalf("a peer silent for %v was refused: %v", silence, err)
	}
	_ = nc.SetDeadline(time.Time{})
	if err := m1.attach(0, nc, mem, g, win, probe); err != nil {
		unmap(mem)
		_ = nc.Close()
		t.Fatal(err)
	}
	t1.start()
	defer t1.Close()
	r := <-acc
	if r.err != nil {
		t.Fatalf("rank 0: %v", r.err)
	}
	defer r.t.Close()
	if n := refused.Load(); n != 0 {
		t.Errorf("%d connections refused, want none", n)
	}
	if err := exchangeAll(ctx, []*Transport{r.t, t1}); err != nil {
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
	nc := dialAlone(t, ctx, cfg)
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
		t.Error("rank 0 connected without rank 1")
	}
}
