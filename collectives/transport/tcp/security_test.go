package tcp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/mesh"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// exchange sends a distinct message in both directions between every pair
// of ranks, under collective seq, and checks the bytes.
func exchange(t testing.TB, ts []*endpoint, seq uint64, size int) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 2*len(ts)*len(ts))
	for s := range ts {
		for d := range ts {
			if s == d {
				continue
			}
			tag := transport.Tag{Group: 5, Seq: seq, Step: uint32(s*len(ts) + d)}
			want := bytes.Repeat([]byte{byte(s*16 + d + int(seq))}, size)
			wg.Add(2)
			go func() {
				defer wg.Done()
				errc <- ts[s].Send(ctx, d, tag, want)
			}()
			go func() {
				defer wg.Done()
				got := make([]byte, size)
				err := ts[d].Recv(ctx, s, tag, got)
				if err == nil && !bytes.Equal(got, want) {
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

// A rank that does not know the secret is refused (package mesh tests
// the other strangers): it fails with mesh.ErrAuth, the refusals reach
// OnRefused, the group then connects and works, and once built, the
// ranks' ports are closed.
func TestWrongSecretRefused(t *testing.T) {
	const n = 3
	ls, addrs := listeners(t, n)
	var refused [n]atomic.Int64
	cfgOf := func(r int) Config {
		return Config{ConnsPerPeer: 1, Setup: msg.Setup{Addrs: addrs, Rank: r, Size: n, Group: 77, Secret: testSecret,
			OnRefused: func(error) { refused[r].Add(1) }}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ts := make([]*endpoint, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := func(r int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts[r], errs[r] = connect(ctx, ls[r], cfgOf(r))
		}()
	}
	start(2) // accepts from ranks 0 and 1, who come later
	bad := cfgOf(0)
	bad.Secret = bytes.Repeat([]byte{0x5a}, 32)
	_, err := connect(ctx, ls[0], bad) // refused as soon as the handshake ends, not at ctx's end
	if !errors.Is(err, mesh.ErrAuth) || ctx.Err() != nil {
		t.Errorf("a wrong secret: %v, want mesh.ErrAuth before the deadline", err)
	}
	ls[0], err = Listen(addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	start(0)
	start(1)
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	defer closeAll(ts)
	if refused[2].Load() == 0 {
		t.Error("OnRefused heard of no refusal")
	}
	if err := exchange(t, ts, 1, 1000); err != nil {
		t.Fatal(err)
	}
	portsClosed(t, ts, addrs)
}

// portsClosed checks that while collectives run, nobody new gets in: the
// ranks' ports are closed.
func portsClosed(t *testing.T, ts []*endpoint, addrs []string) {
	stop := make(chan struct{})
	runErr := make(chan error, 1)
	go func() {
		var err error
		for seq := uint64(2); err == nil; seq++ {
			select {
			case <-stop:
				runErr <- nil
				return
			default:
			}
			err = exchange(t, ts, seq, 3000)
		}
		runErr <- err
	}()
	for range 20 {
		for r := range addrs {
			if nc, err := net.DialTimeout("tcp", addrs[r], time.Second); err == nil {
				_, _ = nc.Write(bytes.Repeat([]byte{0xff}, 200))
				_ = nc.Close()
				t.Errorf("rank %d still accepts connections after Connect", r)
			}
		}
	}
	close(stop)
	if err := <-runErr; err != nil {
		t.Fatalf("collectives while strangers knocked: %v", err)
	}
	for r, tr := range ts {
		if s := tr.Stats(); s.PeersLost != 0 || s.ProtocolErrors != 0 {
			t.Errorf("rank %d: %+v", r, s)
		}
	}
}
