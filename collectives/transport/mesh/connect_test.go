package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// A group forms its mesh in either order, with several connections per
// pair, and on a subset of its pairs; each link carries bytes both ways
// and the peer's hello.
func TestMeshForms(t *testing.T) {
	eachNet(t, func(t *testing.T, k netKind) {
		for _, tc := range []struct {
			name  string
			order Order
			conns int
			peers func(r, n int) []int
		}{
			{"lower dials", LowerDials, 1, nil},
			{"higher dials", HigherDials, 2, nil},
			{"same parity", LowerDials, 3, func(r, n int) []int {
				var out []int
				for q := r % 2; q < n; q += 2 {
					if q != r {
						out = append(out, q)
					}
				}
				return out
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				const n = 4
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cfgs, _ := group(t, k, n)
				for r := range cfgs {
					cfgs[r].Order, cfgs[r].ConnsPerPeer = tc.order, tc.conns
					if tc.peers != nil {
						cfgs[r].Peers = tc.peers(r, n)
					}
				}
				ms, errs, took := connectAll(ctx, cfgs)
				defer closeMeshes(ms)
				for r, err := range errs {
					if err != nil {
						t.Fatalf("rank %d: %v", r, err)
					}
				}
				checkMesh(t, cfgs, ms)
				for r, m := range ms {
					if m.Refused != 0 {
						t.Errorf("rank %d refused %d connections", r, m.Refused)
					}
				}
				t.Logf("formed in %v", took)
			})
		}
	})
}

// closer counts its closes.
type closer struct{ n *atomic.Int64 }

func (c closer) Close() error {
	c.n.Add(1)
	return nil
}

// Setup runs on both sides of each link once both are authenticated,
// bounded by the mesh's context (not the handshake's); a failed Setup
// closes the connection and what it made, and the link is dialled again.
func TestSetup(t *testing.T) {
	eachNet(t, func(t *testing.T, k netKind) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cfgs, _ := group(t, k, 3)
		var failed, closed atomic.Int64
		for r := range cfgs {
			cfgs[r].Setup = func(ctx context.Context, l *Link) error {
				l.Extra = closer{&closed}
				if l.Dialed && l.Peer == 2 && failed.Add(1) == 1 {
					return errors.New("the first setup fails")
				}
				// Bounded by the mesh's context, not the handshake's: both
				// ends are authenticated, and a loaded host may take longer.
				if d, ok := ctx.Deadline(); !ok || time.Until(d) <= DefaultHandshakeTimeout {
					return fmt.Errorf("setup not bounded by the mesh's context: %v %v", d, ok)
				}
				// Each side says who it is, and hears who the other is.
				return roundTrip(l.Conn, fmt.Sprintf("setup %d", cfgs[r].Rank), fmt.Sprintf("setup %d", l.Peer))
			}
		}
		ms, errs, _ := connectAll(ctx, cfgs)
		defer closeMeshes(ms)
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		// The failed dialer's, and its acceptor's, whose Setup then fails.
		if closed.Load() != 2 {
			t.Errorf("%d Extras closed after one failed setup, want 2", closed.Load())
		}
		checkMesh(t, cfgs, ms)
		for r, m := range ms {
			for _, ls := range m.Links {
				for _, l := range ls {
					if l.Extra == nil {
						t.Errorf("rank %d: link to %d without its Extra", r, l.Peer)
					}
				}
			}
		}
		closeMeshes(ms)
		if want := int64(2 + 3*2); closed.Load() != want {
			t.Errorf("%d Extras closed in all, want %d", closed.Load(), want)
		}
	})
}

// A mesh a rank never joins fails at ctx's deadline, naming the missing
// rank and why, and closes what was made.
func TestConnectNamesTheMissing(t *testing.T) {
	eachNet(t, func(t *testing.T, k netKind) {
		cfgs, _ := group(t, k, 3)
		var closed atomic.Int64
		for r := range cfgs {
			cfgs[r].Setup = func(_ context.Context, l *Link) error {
				l.Extra = closer{&closed}
				return nil
			}
		}
		_ = cfgs[2].Listener.Close() // rank 2 never comes
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ms, errs, _ := connectAll(ctx, cfgs[:2])
		defer closeMeshes(ms)
		for r, err := range errs {
			var op *net.OpError
			if !errors.Is(err, transport.ErrTimeout) || !strings.Contains(err.Error(), "not connected: rank 2 (dial: ") ||
				!errors.As(err, &op) {
				t.Errorf("rank %d: %v", r, err)
			}
		}
		if closed.Load() != 2 {
			t.Errorf("%d of the 2 Extras of the pair 0-1 closed", closed.Load())
		}
	})
}

// Configurations that cannot work are refused before anything is made,
// and the listener is closed.
func TestConfigRefused(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"rank":      func(c *Config) { c.Rank = 2 },
		"secret":    func(c *Config) { c.Secret = c.Secret[:MinSecret-1] },
		"label":     func(c *Config) { c.Label = "TCP" },
		"long":      func(c *Config) { c.Label = "ninechars" },
		"hello":     func(c *Config) { c.Hello = make([]byte, MaxHello+1) },
		"conns":     func(c *Config) { c.ConnsPerPeer = MaxConnsPerPeer + 1 },
		"peers":     func(c *Config) { c.Peers = []int{0} },
		"twice":     func(c *Config) { c.Peers = []int{1, 1} },
		"dial":      func(c *Config) { c.Dial = nil },
		"listener":  func(c *Config) { c.Rank, c.Listener = 1, nil },
		"order":     func(c *Config) { c.Order = 2 },
		"handshake": func(c *Config) { c.HandshakeTimeout = -1 },
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c := Config{Rank: 0, Size: 2, Secret: testSecret, Label: "test", Listener: ln,
			Dial: func(context.Context, int) (net.Conn, error) { return nil, io.EOF }}
		mut(&c)
		if _, err := Connect(context.Background(), c); !errors.Is(err, transport.ErrBadArgument) {
			t.Errorf("%s: %v", name, err)
		}
		if c.Listener == nil {
			_ = ln.Close()
		} else if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s: the listener is open: %v", name, err)
		}
	}
	m, err := Connect(context.Background(), Config{Size: 1, Secret: testSecret, Label: "test"})
	if err != nil || len(m.Links) != 1 || m.Links[0] != nil {
		t.Errorf("a group of one: %+v, %v", m, err)
	}
}

// A refusal that dialling again cannot mend (the peer refuses this rank's
// secret) ends Connect at once; its twin, a refusal that may pass (a
// process of another group at the peer's address, as a stale rank of an
// earlier run would be), is dialled again until the right peer takes the
// address, and the mesh forms.
func TestRefusalsThatEndConnectAndThoseThatDoNot(t *testing.T) {
	k := netKinds[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cfgs, _ := group(t, k, 2)
	cfgs[1].Secret = bytes.Repeat([]byte{0x5a}, len(testSecret))
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	defer acancel()
	refuser := make(chan struct{})
	go func() { _, _ = Connect(actx, cfgs[1]); close(refuser) }() // refuses rank 0's proof
	_, err := Connect(ctx, cfgs[0])
	acancel()
	<-refuser // leaves no goroutine behind for the tests that count them
	if !errors.Is(err, ErrAuth) || ctx.Err() != nil {
		t.Fatalf("a peer refusing the secret: %v, want ErrAuth before the deadline", err)
	}

	cfgs, addrs := group(t, k, 2)
	stale := cfgs[1]
	stale.Group = 99
	sctx, scancel := context.WithTimeout(ctx, time.Second)
	defer scancel()
	staleDone := make(chan error, 1)
	go func() { _, err := Connect(sctx, stale); staleDone <- err }() // holds the address for a second
	dialed := make(chan error, 1)
	var m0 *Mesh
	go func() {
		var err error
		m0, err = Connect(ctx, cfgs[0])
		dialed <- err
	}()
	var ln net.Listener
	if err := <-staleDone; err == nil {
		t.Fatal("the stale acceptor formed a mesh")
	}
	ln, err = net.Listen("tcp", addrs[1]) // the right rank 1 takes the address
	if err != nil {
		t.Fatal(err)
	}
	cfgs[1].Listener = ln
	m1, err := Connect(ctx, cfgs[1])
	if err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	defer closeMeshes([]*Mesh{m1})
	if err := <-dialed; err != nil {
		t.Fatalf("rank 0 after a stale peer of another group: %v", err)
	}
	defer closeMeshes([]*Mesh{m0})
}
