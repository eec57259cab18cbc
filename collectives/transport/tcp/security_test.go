package tcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// exchange sends a distinct message in both directions between every pair
// of ranks, under collective seq, and checks the bytes.
func exchange(t testing.TB, ts []*Transport, seq uint64, size int) error {
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

// recorder keeps what is written through it.
type recorder struct {
	net.Conn
	mu  sync.Mutex
	out []byte
}

func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	r.out = append(r.out, b...)
	r.mu.Unlock()
	return r.Conn.Write(b)
}

// recordedHandshake runs a genuine handshake of rank 0 (with the group's
// secret) against a stand-in acceptor for rank 2 and returns the bytes the
// dialer sent: hello then proof.
func recordedHandshake(t *testing.T, addrs []string) []byte {
	t.Helper()
	cfg := Config{Rank: 0, Size: 3, Group: 77, Addrs: addrs, Secret: testSecret, ConnsPerPeer: 1}
	dcfg, _ := cfg.normalize()
	cfg.Rank = 2
	acfg, _ := cfg.normalize()
	dialer, acceptor := newTransport(dcfg), newTransport(acfg)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	rec := &recorder{Conn: a}
	done := make(chan error, 1)
	go func() {
		_, _, err := dialer.dialHandshake(rec, 2, 0)
		done <- err
	}()
	m := &mesh{t: acceptor, full: make(chan struct{}), errs: map[int]error{}, need: 99}
	if _, _, _, _, err := acceptor.acceptHandshake(b, m); err != nil {
		t.Fatalf("stand-in acceptor: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("recording dialer: %v", err)
	}
	if len(rec.out) != 2*hsSize {
		t.Fatalf("recorded %d bytes", len(rec.out))
	}
	return rec.out
}

// hsRig is a group of n ranks whose rank 2 builds its mesh while the test
// knocks at its door as strangers: everything refused is recorded.
type hsRig struct {
	n      int
	ls     []*Listener
	addrs  []string
	replay []byte // a genuine dialer's hello and proof, recorded

	mu      sync.Mutex
	refused []string
	count   atomic.Int64
}

func (g *hsRig) cfgOf(r int) Config {
	return Config{Rank: r, Size: g.n, Group: 77, Addrs: g.addrs, Secret: testSecret,
		ConnsPerPeer: 1, HandshakeTimeout: 500 * time.Millisecond,
		OnRefused: func(err error) {
			g.mu.Lock()
			g.refused = append(g.refused, err.Error())
			g.mu.Unlock()
			g.count.Add(1)
		}}
}

// dial connects to rank 2 for at most 5 s.
func (g *hsRig) dial() (net.Conn, error) {
	nc, err := net.Dial("tcp", g.addrs[2])
	if err == nil {
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	}
	return nc, err
}

// dialHS runs a genuine dialer's handshake with rank 0's configuration
// changed by mut.
func (g *hsRig) dialHS(mut func(*Config)) error {
	cfg := g.cfgOf(0)
	mut(&cfg)
	c, err := cfg.normalize()
	if err != nil {
		return err
	}
	nc, err := g.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	_, _, err = newTransport(c).dialHandshake(nc, 2, 0)
	return err
}

// raw writes b and reads what comes back until the acceptor closes.
func (g *hsRig) raw(b []byte) ([]byte, error) {
	nc, err := g.dial()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	if _, err := nc.Write(b); err != nil {
		return nil, err
	}
	return io.ReadAll(nc)
}

// replayed plays the recorded handshake again.
func (g *hsRig) replayed() error {
	nc, err := g.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	if _, err := nc.Write(g.replay[:hsSize]); err != nil {
		return err
	}
	if _, _, err := readHS(nc, hsChallenge); err != nil {
		return err
	}
	if _, err := nc.Write(g.replay[hsSize:]); err != nil {
		return err
	}
	v, _, err := readHS(nc, hsVerdict)
	if err != nil {
		return err
	}
	if v.Status != stOK {
		return refusal(v.Status)
	}
	return nil
}

// stranger is one kind of connection rank 2 must refuse: run knocks,
// check judges what run saw.
type stranger struct {
	name  string
	run   func() error
	check func(error) bool
}

// refusedFor is a check that the refusal names status st.
func refusedFor(st uint8) func(error) bool {
	return func(err error) bool { return err != nil && strings.Contains(err.Error(), statusText[st]) }
}

// speakers are strangers who speak the handshake, wrongly.
func (g *hsRig) speakers() []stranger {
	other := bytes.Repeat([]byte{0x5a}, 32)
	return []stranger{
		{"wrong secret", func() error { return g.dialHS(func(c *Config) { c.Secret = other }) }, refusedFor(stMAC)},
		{"wrong group", func() error { return g.dialHS(func(c *Config) { c.Group = 76 }) }, refusedFor(stGroup)},
		{"wrong conns", func() error { return g.dialHS(func(c *Config) { c.ConnsPerPeer = 2 }) }, refusedFor(stConfig)},
		{"replay", g.replayed, refusedFor(stMAC)},
		{"wrong rank", func() error {
			h := hsMsg{Version: protoVersion, Kind: hsHello, Group: 77, From: 2, To: 2, Size: uint32(g.n), Conns: 1,
				MaxFrame: DefaultMaxFrame, Window: DefaultMaxBuffered}
			got, err := g.raw(h.encode())
			if err != nil {
				return err
			}
			ch, err := decodeHS(got)
			if err != nil {
				return err
			}
			return refusal(ch.Status)
		}, refusedFor(stRank)},
	}
}

// mutes are strangers who do not speak the handshake.
func (g *hsRig) mutes() []stranger {
	return []stranger{
		{"garbage", func() error {
			got, err := g.raw(bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 8))
			if err == nil && len(got) > 0 {
				return errors.New("garbage got an answer")
			}
			return errors.New("closed")
		}, func(err error) bool { return err.Error() == "closed" }},
		{"half hello", func() error {
			h := hsMsg{Version: protoVersion, Kind: hsHello, Group: 77, To: 2, Size: uint32(g.n), Conns: 1}
			nc, err := net.Dial("tcp", g.addrs[2])
			if err != nil {
				return err
			}
			_, _ = nc.Write(h.encode()[:40])
			return nc.Close()
		}, func(err error) bool { return err == nil }},
		{"silent", func() error {
			nc, err := g.dial()
			if err != nil {
				return err
			}
			defer nc.Close()
			got, _ := io.ReadAll(nc) // the acceptor gives up after HandshakeTimeout
			if len(got) > 0 {
				return errors.New("silent client got an answer")
			}
			return nil
		}, func(err error) bool { return err == nil }},
	}
}

// A stranger, a wrong secret, a wrong group id (a rank of another run), a
// replayed handshake, a wrong rank, garbage, a half hello and a silent
// client all reach a rank while it builds its mesh: each is refused, and
// the mesh and its collectives are unaffected. Once built, the ranks'
// ports are closed.
func TestHandshakeRefusals(t *testing.T) {
	g := &hsRig{n: 3}
	g.ls, g.addrs = listeners(t, g.n)
	g.replay = recordedHandshake(t, g.addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ts := make([]*Transport, g.n)
	errs := make([]error, g.n)
	var wg sync.WaitGroup
	start := func(r int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts[r], errs[r] = g.ls[r].Connect(ctx, g.cfgOf(r))
		}()
	}
	start(2) // accepts from ranks 0 and 1, who come later
	strangers := append(g.speakers(), g.mutes()...)
	for _, s := range strangers {
		if err := s.run(); !s.check(err) {
			t.Errorf("%s: %v", s.name, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for g.count.Load() < int64(len(strangers)) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	g.mu.Lock()
	for _, r := range g.refused {
		t.Log(r)
	}
	if len(g.refused) != len(strangers) {
		t.Errorf("refused %d connections, want %d: %q", len(g.refused), len(strangers), g.refused)
	}
	g.mu.Unlock()
	start(0)
	start(1)
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	defer closeAll(ts)
	if got := ts[2].Stats().Refused; got != uint64(len(strangers)) {
		t.Errorf("Stats().Refused = %d, want %d", got, len(strangers))
	}
	if err := exchange(t, ts, 1, 1000); err != nil {
		t.Fatal(err)
	}
	portsClosed(t, ts, g.addrs)
}

// portsClosed checks that while collectives run, nobody new gets in: the
// ranks' ports are closed.
func portsClosed(t *testing.T, ts []*Transport, addrs []string) {
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
