package mesh

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

var testSecret = bytes.Repeat([]byte("mesh-test-secret"), 2)

// netKind is a kind of socket a mesh runs over in the tests: TCP on
// loopback, or packet sockets of the abstract unix namespace (Linux), as
// the shared-memory transport uses.
type netKind struct {
	name   string
	listen func(t testing.TB) net.Listener
	dial   func(ctx context.Context, addr string) (net.Conn, error)
}

var netKinds = []netKind{
	{
		name: "tcp",
		listen: func(t testing.TB) net.Listener {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			return ln
		},
		dial: func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
	},
	{
		name: "unix",
		listen: func(t testing.TB) net.Listener {
			var id [8]byte
			_, _ = rand.Read(id[:])
			ln, err := net.Listen("unixpacket", "@choreo-mesh-test/"+hex.EncodeToString(id[:]))
			if err != nil {
				t.Fatal(err)
			}
			return ln
		},
		dial: func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unixpacket", addr)
		},
	},
}

// eachNet runs f over each kind of socket (the abstract unix namespace is
// Linux's only).
func eachNet(t *testing.T, f func(t *testing.T, k netKind)) {
	for _, k := range netKinds {
		t.Run(k.name, func(t *testing.T) {
			if k.name == "unix" && runtime.GOOS != "linux" {
				t.Skip("abstract unix sockets are Linux's")
			}
			f(t, k)
		})
	}
}

// group makes the configurations of n ranks over fresh listeners of k,
// each announcing "rank <r>"; it returns them and the ranks' addresses.
// Listeners left unused are closed at the test's end.
func group(t testing.TB, k netKind, n int) ([]Config, []string) {
	t.Helper()
	cfgs := make([]Config, n)
	addrs := make([]string, n)
	for r := range n {
		ln := k.listen(t)
		t.Cleanup(func() { _ = ln.Close() })
		addrs[r] = ln.Addr().String()
		cfgs[r] = Config{Rank: r, Size: n, Group: 77, Secret: testSecret, Label: "test", Listener: ln,
			Hello: []byte(fmt.Sprintf("rank %d", r))}
	}
	for r := range n {
		cfgs[r].Dial = func(ctx context.Context, p int) (net.Conn, error) { return k.dial(ctx, addrs[p]) }
	}
	return cfgs, addrs
}

// connectAll runs Connect for every configuration at once and reports
// how long the slowest took.
func connectAll(ctx context.Context, cfgs []Config) ([]*Mesh, []error, time.Duration) {
	ms := make([]*Mesh, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	start := time.Now()
	for r := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ms[r], errs[r] = Connect(ctx, cfgs[r])
		}()
	}
	wg.Wait()
	return ms, errs, time.Since(start)
}

func closeMeshes(ms []*Mesh) {
	for _, m := range ms {
		if m != nil {
			_ = m.Close()
		}
	}
}

// checkMesh checks that every pair of ranks that list each other holds
// matching links (same index, one dialed side, the peer's hello), and
// that each link carries bytes both ways.
func checkMesh(t testing.TB, cfgs []Config, ms []*Mesh) {
	t.Helper()
	var wg sync.WaitGroup
	errc := make(chan error, 4*len(ms)*len(ms)*MaxConnsPerPeer)
	for r, m := range ms {
		for p, ls := range m.Links {
			if (ls == nil) == listed(cfgs[r], p) {
				t.Fatalf("rank %d: %d links to rank %d, listed %v", r, len(ls), p, listed(cfgs[r], p))
			}
			for i, l := range ls {
				o := ms[p].Links[r][i]
				switch {
				case l.Peer != p || l.Index != i || l.Conn == nil:
					t.Fatalf("rank %d link %d to %d: %+v", r, i, p, l)
				case l.Dialed == o.Dialed:
					t.Fatalf("ranks %d and %d: both or neither dialed link %d", r, p, i)
				case string(l.Hello) != fmt.Sprintf("rank %d", p):
					t.Fatalf("rank %d heard %q from rank %d", r, l.Hello, p)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					errc <- roundTrip(l.Conn, fmt.Sprintf("%d->%d #%d", r, p, i), fmt.Sprintf("%d->%d #%d", p, r, i))
				}()
			}
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// roundTrip writes out on nc and reads in from it.
func roundTrip(nc net.Conn, out, in string) error {
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = nc.SetDeadline(time.Time{}) }()
	if _, err := nc.Write([]byte(out)); err != nil {
		return err
	}
	got := make([]byte, len(in))
	if _, err := io.ReadFull(nc, got); err != nil || string(got) != in {
		return fmt.Errorf("read %q (%v), want %q", got, err, in)
	}
	return nil
}

// listed reports whether cfg's rank links to p.
func listed(cfg Config, p int) bool {
	if p == cfg.Rank {
		return false
	}
	if cfg.Peers == nil {
		return true
	}
	for _, q := range cfg.Peers {
		if q == p {
			return true
		}
	}
	return false
}

// standIn is a builder for rank of a group of size, for a test that plays
// one side of a handshake by hand.
func standIn(t testing.TB, rank, size int, tweak func(*Config)) *builder {
	t.Helper()
	cfg := Config{Rank: rank, Size: size, Group: 77, Secret: testSecret, Label: "test",
		Listener: nopListener{}, Hello: []byte(fmt.Sprintf("rank %d", rank)),
		Dial: func(context.Context, int) (net.Conn, error) { return nil, net.ErrClosed }}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := cfg.normalize()
	if err != nil {
		t.Fatal(err)
	}
	return newBuilder(c)
}

// nopListener stands for a listener a stand-in never uses.
type nopListener struct{ net.Listener }

func (nopListener) Close() error { return nil }
