package tcp

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// testSecret is the secret of the groups the tests build.
var testSecret = func() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}()

// listeners opens n listeners on 127.0.0.1 with ports the OS picks.
func listeners(t testing.TB, n int) ([]*Listener, []string) {
	t.Helper()
	ls := make([]*Listener, n)
	addrs := make([]string, n)
	for i := range ls {
		l, err := Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls[i], addrs[i] = l, l.Addr()
	}
	return ls, addrs
}

// build connects n ranks on loopback, each configured by tweak (which may
// be nil), and returns them indexed by rank.
func build(t testing.TB, n int, tweak func(*Config)) []*Transport {
	t.Helper()
	ls, addrs := listeners(t, n)
	ts := make([]*Transport, n)
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
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
	for r, err := range errs {
		if err != nil {
			for _, tr := range ts {
				if tr != nil {
					_ = tr.Close()
				}
			}
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return ts
}

func asTransports(ts []*Transport) []transport.Transport {
	out := make([]transport.Transport, len(ts))
	for i, t := range ts {
		out[i] = t
	}
	return out
}

// tcpOverhead is what an eager message costs of the window beyond its
// bytes.
const tcpOverhead = msg.Overhead

// writeFrame writes a frame on c with no context.
func (c *conn) writeFrame(f *frame, payload []byte) error {
	_, err := c.write(context.Background(), f, payload)
	return err
}
