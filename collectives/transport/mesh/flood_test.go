package mesh

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/internal/gate"
)

// flood keeps n silent connections open to addr until ctx ends, dialling
// each again as soon as the listener closes it (and again and again while
// nothing listens there). The returned func waits for the flood to end;
// made counts the connections as they come.
func flood(ctx context.Context, k netKind, addr string, n int, made *atomic.Uint64) (wait func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pause := time.Millisecond
			one := make([]byte, 1)
			for ctx.Err() == nil {
				nc, err := k.dial(ctx, addr)
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

// peak samples the number of goroutines and the heap in use until stop is
// closed, and returns the largest of each.
func peak(stop <-chan struct{}) (goroutines int, heap uint64) {
	var ms runtime.MemStats
	for {
		goroutines = max(goroutines, runtime.NumGoroutine())
		runtime.ReadMemStats(&ms)
		heap = max(heap, ms.HeapInuse)
		select {
		case <-stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestFloodDoesNotKeepPeersOut: while three ranks connect, 300 silent
// connections are held open to each listening rank, each dialled again as
// soon as it is closed. The mesh forms, and soon: within twice the time
// the same group took without the flood, or that time and four seconds,
// whichever is longer (forming takes milliseconds, so twice that alone
// would measure the scheduler; and the flood runs in this process, taking
// CPU from the ranks). What the strangers cost is bounded: the goroutines
// never exceed the flood's own, two gates' worth of handshakes per
// listener and a margin, and the heap grows by less than 64 MiB. When
// silent connections could fill every handshake slot, a flood kept the
// peers out for the whole join timeout.
func TestFloodDoesNotKeepPeersOut(t *testing.T) {
	eachNet(t, func(t *testing.T, k netKind) {
		const n, strangers = 3, 300
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cfgs, _ := group(t, k, n)
		ms, errs, unflooded := connectAll(ctx, cfgs)
		closeMeshes(ms)
		for r, err := range errs {
			if err != nil {
				t.Fatalf("without the flood, rank %d: %v", r, err)
			}
		}

		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		baseG := runtime.NumGoroutine()
		cfgs, addrs := group(t, k, n)
		made, stopFlood := floodAll(t, ctx, k, addrs[1:], strangers) // rank 0 only dials
		defer stopFlood()
		sampled, stopSampling := make(chan struct{}), make(chan struct{})
		var peakG int
		var peakHeap uint64
		go func() {
			defer close(sampled)
			peakG, peakHeap = peak(stopSampling)
		}()
		before := made.Load()
		ms, errs, flooded := connectAll(ctx, cfgs)
		during := made.Load() - before
		defer closeMeshes(ms)
		close(stopSampling) // before the flood's end wakes its 600 goroutines
		<-sampled
		stopFlood()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("under the flood, rank %d: %v", r, err)
			}
		}
		var refused uint64
		for _, m := range ms {
			refused += m.Refused
		}
		t.Logf("mesh formed in %v without the flood, %v under it (%d strangers dialled meanwhile, %d refused); "+
			"peak %d goroutines (%d before), heap %d MiB (%d before)",
			unflooded, flooded, during, refused, peakG, baseG, peakHeap>>20, base.HeapInuse>>20)
		// A flood that kept the peers out would hold them until Connect's
		// 60 s deadline; a loaded 2-core machine has taken 8.6 s to form
		// under it, so the bound leaves room for that and still catches it.
		if bound := max(2*unflooded, unflooded+20*time.Second); flooded > bound {
			t.Errorf("under the flood the mesh took %v, over %v (%v without it)", flooded, bound, unflooded)
		}
		if refused == 0 {
			t.Error("no stranger was refused: the flood never reached the listeners")
		}
		if bound := baseG + (n-1)*strangers + (n-1)*2*gate.DefaultSlots + 100; peakG > bound {
			t.Errorf("%d goroutines under the flood, over %d", peakG, bound)
		}
		if grew := int64(peakHeap) - int64(base.HeapInuse); grew > 64<<20 {
			t.Errorf("the heap grew by %d MiB under the flood", grew>>20)
		}
		checkMesh(t, cfgs, ms)
	})
}

// floodAll has strangers connections dial each of addrs, and returns once
// they are all in the listeners' backlogs, with their count so far and
// the func that ends the flood and waits for it.
func floodAll(t *testing.T, ctx context.Context, k netKind, addrs []string, strangers int) (*atomic.Uint64, func()) {
	fctx, stop := context.WithCancel(ctx)
	made := new(atomic.Uint64)
	var waits []func()
	for _, a := range addrs {
		waits = append(waits, flood(fctx, k, a, strangers, made))
	}
	end := func() {
		stop()
		for _, w := range waits {
			w()
		}
	}
	for made.Load() < uint64(len(addrs)*strangers) {
		if ctx.Err() != nil {
			end()
			t.Fatalf("the flood made only %d connections", made.Load())
		}
		time.Sleep(time.Millisecond)
	}
	return made, end
}

// acceptAlone runs rank 1 of a group of two over k, whose rank 0 the test
// plays by hand; it returns rank 1's address and where its Connect
// reports.
func acceptAlone(t *testing.T, ctx context.Context, k netKind, tweak func(*Config)) (string, <-chan error) {
	t.Helper()
	cfgs, addrs := group(t, k, 2)
	if tweak != nil {
		tweak(&cfgs[1])
	}
	out := make(chan error, 1)
	go func() {
		m, err := Connect(ctx, cfgs[1])
		if err == nil {
			_ = m.Close()
		}
		out <- err
	}()
	return addrs[1], out
}

// TestSlowHelloGetsIn is the flood test's false-positive twin: a real
// peer on a loaded machine may connect and then say nothing for a while.
// One silent for far longer than a handshake slot's minimum age, but
// within the first-byte deadline, at a listener nobody floods, is neither
// cut nor timed out: it gets in.
func TestSlowHelloGetsIn(t *testing.T) {
	const silence = time.Second
	if silence < 10*gate.DefaultMinAge || silence > firstBytesMax/2 {
		t.Fatalf("silence %v does not sit between the slot's minimum age %v and the first-byte deadline %v",
			silence, gate.DefaultMinAge, firstBytesMax)
	}
	eachNet(t, func(t *testing.T, k netKind) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var refused atomic.Int64
		addr, acc := acceptAlone(t, ctx, k, func(c *Config) { c.OnRefused = func(error) { refused.Add(1) } })
		nc, err := k.dial(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		time.Sleep(silence)
		_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := standIn(t, 0, 2, nil).dialHandshake(nc, 1, 0); err != nil {
			t.Fatalf("a peer silent for %v was refused: %v", silence, err)
		}
		if err := <-acc; err != nil {
			t.Fatalf("rank 1: %v", err)
		}
		if n := refused.Load(); n != 0 {
			t.Errorf("%d connections refused, want none", n)
		}
	})
}

// TestSilentStrangerLeavesEarly: a connection that says nothing is closed
// at the first-byte deadline, long before the handshake's own timeout, and
// refused as timed out.
func TestSilentStrangerLeavesEarly(t *testing.T) {
	eachNet(t, func(t *testing.T, k netKind) {
		const handshake = 30 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 2*handshake)
		defer cancel()
		why := make(chan error, 8)
		addr, acc := acceptAlone(t, ctx, k, func(c *Config) {
			c.HandshakeTimeout = handshake
			c.OnRefused = func(err error) {
				select {
				case why <- err:
				default:
				}
			}
		})
		nc, err := k.dial(ctx, addr)
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
		if err := <-acc; err == nil {
			t.Error("rank 1 connected without rank 0")
		}
	})
}
