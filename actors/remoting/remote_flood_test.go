package remoting_test

// Strangers cost a runtime's control port a fixed small buffer each, for
// a bounded time: a flood of HTTP/2 streams claiming 16 MiB bodies and
// thousands of silent connections leave its memory and its descriptors
// where they were, and its remoting working; a flood of silent connections
// redialled as fast as they are closed keeps no real client out.

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/choreo-gpu/choreo/actors/remoting"
	"github.com/choreo-gpu/choreo/wire"
)

// stats is what a peer's "stats" command reports.
type stats struct{ rss, peak, fds, heap, stack int64 }

func (p *peer) stats() stats {
	p.t.Helper()
	p.do("stats")
	f := strings.Fields(strings.TrimPrefix(p.expect("stats "), "stats "))
	var v [5]int64
	for i := range v {
		if i < len(f) {
			v[i], _ = strconv.ParseInt(f[i], 10, 64)
		}
	}
	if v[0] <= 0 || v[1] <= 0 || v[2] <= 0 {
		p.t.Fatalf("%s: stats %v", p.name, f)
	}
	return stats{v[0], v[1], v[2], v[3], v[4]}
}

// frame is an HTTP/2 frame.
func frame(typ, flags byte, stream uint32, payload []byte) []byte {
	b := make([]byte, 9, 9+len(payload))
	b[0], b[1], b[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	b[3], b[4] = typ, flags
	binary.BigEndian.PutUint32(b[5:], stream)
	return append(b, payload...)
}

// grpcFlood is an HTTP/2 client preface and n gRPC calls to
// ListProcesses, each a HEADERS frame and a DATA frame holding only a
// gRPC message prefix that claims 16 MiB.
func grpcFlood(n int) []byte {
	lit := func(b []byte, s string) []byte { return append(append(b, byte(len(s))), s...) }
	var hdr []byte
	hdr = append(hdr, 0x83, 0x86)                                                       // :method POST, :scheme http
	hdr = lit(append(hdr, 0x04), "/remote.Remoting/ListProcesses")                      // :path
	hdr = lit(append(hdr, 0x01), "localhost")                                           // :authority
	hdr = lit(lit(append(hdr, 0x00), "content-type"), "application/grpc+proto")         // literal, new name
	hdr = lit(lit(append(hdr, 0x00), "te"), "trailers")                                 // literal, new name
	out := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), frame(0x4, 0, 0, nil)...) // preface, SETTINGS
	for i := range n {
		id := uint32(2*i + 1)
		out = append(out, frame(0x1, 0x4, id, hdr)...)                 // HEADERS, END_HEADERS
		out = append(out, frame(0x0, 0, id, []byte{0, 1, 0, 0, 0})...) // DATA: uncompressed, 16 MiB
	}
	return out
}

// silentFlood opens n connections to addr that never send a byte, with
// a few dialers at once, and returns them (the caller closes them) and
// how many dials failed.
func silentFlood(addr string, n int) ([]net.Conn, int64) {
	const dialers = 8
	var (
		mu     sync.Mutex
		conns  []net.Conn
		failed atomic.Int64
		wg     sync.WaitGroup
		next   atomic.Int64
	)
	for range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return conns, failed.Load()
}

// floodSize is how many silent connections this process can hold: 15,000,
// or fewer under a lower descriptor limit.
func floodSize(t *testing.T) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max && lim.Cur < 16000 {
		lim.Cur = min(lim.Max, 16000)
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	n := min(15000, int(lim.Cur)-500)
	if n < 1000 {
		t.Skipf("descriptor limit %d: too low for the flood", lim.Cur)
	}
	return n
}

func TestRemoteStrangersCostLittle(t *testing.T) {
	noLeaks(t)
	const limit = 64 << 20 // growth allowed: RSS and heap
	a, b := startPeer(t, "node", 0, secret), startPeer(t, "node", 1, secret)
	a.ping(b, 1, 1)
	b.ping(a, 2, 0)
	base := a.stats()

	// 1000 HTTP/2 streams claiming 16 MiB each, 250 on each of 4 connections
	var wg sync.WaitGroup
	flood := grpcFlood(250)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", a.addr, bound)
			if err != nil {
				t.Error(err)
				return
			}
			defer func() { _ = c.Close() }()
			_, _ = c.Write(flood) // refused at its first byte: the write may be cut short
			_ = c.SetReadDeadline(time.Now().Add(bound))
			buf := make([]byte, 512)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()

	// thousands of silent connections, held open
	n := floodSize(t)
	start := time.Now()
	conns, failed := silentFlood(a.addr, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	end := time.Now()
	t.Logf("%d silent connections in %v (%d dials failed)", len(conns), end.Sub(start).Round(time.Millisecond), failed)
	if len(conns) < n/2 {
		t.Fatalf("only %d of %d silent connections were made", len(conns), n)
	}

	// the rank closed its ends on its own: its descriptors are back within
	// 5 s (what is still in its accept queue included; the race detector
	// makes each accept several times slower, so 20 s under it)
	fdBound := 5 * time.Second
	if raceOn {
		fdBound = 20 * time.Second
	}
	var s stats
	for {
		s = a.stats()
		if s.fds <= base.fds || time.Since(end) > fdBound {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("fds %d -> %d (%v after the flood); peak RSS %d MiB -> %d MiB; heap %d MiB -> %d MiB; stacks %d MiB -> %d MiB",
		base.fds, s.fds, time.Since(end).Round(time.Millisecond), base.peak>>20, s.peak>>20, base.heap>>20, s.heap>>20, base.stack>>20, s.stack>>20)
	if s.fds > base.fds {
		t.Errorf("%d descriptors %v after the flood, %d before", s.fds, fdBound, base.fds)
	}
	if grown := s.heap + s.stack - base.heap - base.stack; grown > limit {
		t.Errorf("the flood grew the heap and stacks by %d MiB, want under %d MiB", grown>>20, limit>>20)
	}
	// RSS, at its peak: under the race detector it also holds the
	// detector's own state for every goroutine the flood made, so it is
	// checked without it only
	if grown := s.peak - base.rss; grown > limit && !raceOn {
		t.Errorf("the flood grew peak RSS by %d MiB, want under %d MiB", grown>>20, limit>>20)
	}
	a.awaitWarn("not a choreo control handshake")
	if a.saw("WARN") > 8 { // the 4 HTTP/2 connections; the silent ones are not worth a Warn
		t.Errorf("%d Warn lines for the flood:\n%s", a.saw("WARN"), a.out.String())
	}

	a.ping(b, 3, 1) // still serves, both ways
	b.ping(a, 4, 0)
	a.close()
	b.close()
}

// redialFlood keeps n silent connections open to addr: each one the server
// closes is dialled again at once, until stop is called, which closes them
// all and returns how many dials were made.
func redialFlood(addr string, n int) (stop func() int64) {
	var (
		wg    sync.WaitGroup
		dials atomic.Int64
		mu    sync.Mutex
		open  = map[net.Conn]bool{}
		done  = make(chan struct{})
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			for {
				select {
				case <-done:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", addr, time.Second)
				dials.Add(1)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				mu.Lock()
				open[c] = true
				mu.Unlock()
				for { // until the server closes it, or stop does
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
				mu.Lock()
				delete(open, c)
				mu.Unlock()
				_ = c.Close()
			}
		}()
	}
	return func() int64 {
		close(done)
		mu.Lock()
		for c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
		return dials.Load()
	}
}

// countingCreds are a client's credentials that count failed handshakes.
type countingCreds struct {
	credentials.TransportCredentials
	failed *atomic.Int64
	last   *atomic.Value // error
}

func (c countingCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		c.failed.Add(1)
		c.last.Store(err)
	}
	return conn, info, err
}

func (c countingCreds) Clone() credentials.TransportCredentials {
	return countingCreds{c.TransportCredentials.Clone(), c.failed, c.last}
}

// TestRemoteConnectsThroughASilentFlood: while 300 silent connections are
// redialled against a runtime's control port as fast as it closes them,
// 20 fresh authenticated connections in a row each get in at their first
// handshake and deliver a message.
func TestRemoteConnectsThroughASilentFlood(t *testing.T) {
	noLeaks(t)
	a := startPeer(t, "node", 0, secret)
	stop := redialFlood(a.addr, 300)
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	time.Sleep(time.Second) // the flood is under way: the server's gates are full
	var failed atomic.Int64
	var last atomic.Value
	creds := countingCreds{remoting.NewClientCredentials(secret, claim), &failed, &last}
	start := time.Now()
	for i := 1; i <= 20; i++ {
		c, cc, ctx := rawClient(t, a.addr, creds)
		s, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("connection %d: %v (failed handshakes: %d, the last: %v)", i, err, failed.Load(), last.Load())
		}
		if err := s.Send(batch(a, "choreo.wire.Ping", marshal(t, &wire.Ping{Nonce: uint64(i)}))); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		a.expect(fmt.Sprintf("got-ping %d", i))
		_ = cc.Close()
	}
	took := time.Since(start)
	dials := stop()
	stopped = true
	t.Logf("20 connections in %v through %d silent dials", took.Round(time.Millisecond), dials)
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of the connections' handshakes failed, the last: %v", n, last.Load())
	}
	if dials <= 300 {
		t.Fatalf("only %d silent dials: the server never closed one, so the flood did not test its gates", dials)
	}
	a.close()
}
