package mesh

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
func recordedHandshake(t *testing.T) []byte {
	t.Helper()
	dialer, acceptor := standIn(t, 0, 3, nil), standIn(t, 2, 3, nil)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	rec := &recorder{Conn: a}
	done := make(chan error, 1)
	go func() {
		_, err := dialer.dialHandshake(rec, 2, 0)
		done <- err
	}()
	if _, err := acceptor.acceptHandshake(&guest{Conn: b, ctx: context.Background()}); err != nil {
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

// stranger is one connection that must be refused: run plays it and
// reports what it saw; want is what the acceptor refuses it as (nil: any
// error).
type stranger struct {
	name string
	run  func() error
	saw  error // what run must return (errors.Is), nil: nothing
	want error
}

// A stranger, a wrong secret, a rank of another group, another kind of
// link, another version, a replayed handshake, a wrong rank, a payload
// the rank refuses, garbage, a half hello and a silent client all reach a
// rank while it builds its mesh: each is refused, as what it is, and the
// mesh is unaffected. Once built, the rank's listener is closed.
func TestHandshakeRefusals(t *testing.T) {
	eachNet(t, func(t *testing.T, k netKind) {
		const n = 3
		cfgs, addrs := group(t, k, n)
		replay := recordedHandshake(t)
		var mu sync.Mutex
		var refused []error
		cfgs[2].HandshakeTimeout = 500 * time.Millisecond
		cfgs[2].OnRefused = func(err error) {
			mu.Lock()
			refused = append(refused, err)
			mu.Unlock()
		}
		var setups atomic.Int64 // Setup runs only once both sides proved the secret
		cfgs[2].Setup = func(context.Context, *Link) error {
			setups.Add(1)
			return nil
		}
		cfgs[2].CheckHello = func(_ int, h []byte) error {
			if bytes.HasPrefix(h, []byte("rank ")) {
				return nil
			}
			return errors.New("not a rank's hello")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		acc := make(chan error, 1)
		var m2 *Mesh
		go func() {
			var err error
			m2, err = Connect(ctx, cfgs[2]) // accepts ranks 0 and 1, who come later
			acc <- err
		}()
		strangers := strangersOf(t, k, addrs[2], replay)
		for _, s := range strangers {
			if err := s.run(); (s.saw == nil) != (err == nil) || (s.saw != nil && !errors.Is(err, s.saw)) {
				t.Errorf("%s: saw %v, want %v", s.name, err, s.saw)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			got := len(refused)
			mu.Unlock()
			if got >= len(strangers) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		mu.Lock()
		checkRefused(t, strangers, refused)
		mu.Unlock()
		if n := setups.Load(); n != 0 {
			t.Errorf("Setup ran %d times for strangers", n)
		}

		ms, errs, _ := connectAll(ctx, cfgs[:2])
		defer closeMeshes(ms)
		if err := <-acc; err != nil {
			t.Fatalf("rank 2: %v", err)
		}
		ms = append(ms, m2)
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		checkMesh(t, cfgs, ms)
		if m2.Refused != uint64(len(strangers)) {
			t.Errorf("Mesh.Refused = %d, want %d", m2.Refused, len(strangers))
		}
		if nc, err := k.dial(ctx, addrs[2]); err == nil {
			_ = nc.Close()
			t.Error("rank 2 still accepts connections after Connect")
		}
	})
}

// checkRefused checks that the refusals match the strangers one to one,
// each as what it is.
func checkRefused(t *testing.T, strangers []stranger, refused []error) {
	t.Helper()
	for _, err := range refused {
		t.Log(err)
	}
	if len(refused) != len(strangers) {
		t.Errorf("refused %d connections, want %d", len(refused), len(strangers))
	}
	left := append([]error(nil), refused...)
	for _, s := range strangers {
		if s.want == nil {
			continue
		}
		found := false
		for i, err := range left {
			if errors.Is(err, s.want) {
				left = append(left[:i], left[i+1:]...)
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: no refusal as %v", s.name, s.want)
		}
	}
}

// strangersOf are the connections TestHandshakeRefusals sends to addr, a
// rank 2 of 3 that accepts ranks 0 and 1.
func strangersOf(t *testing.T, k netKind, addr string, replay []byte) []stranger {
	dial := func() net.Conn {
		nc, err := k.dial(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		return nc
	}
	dialHS := func(tweak func(*Config)) error { // rank 0's link 0, as tweak makes it
		nc := dial()
		defer nc.Close()
		_, err := standIn(t, 0, 3, tweak).dialHandshake(nc, 2, 0)
		return err
	}
	raw := func(msgs ...[]byte) error { // writes msgs; the answer's status, or what closed it
		nc := dial()
		defer nc.Close()
		for i, b := range msgs {
			if _, err := nc.Write(b); err != nil {
				return err
			}
			if i == len(msgs)-1 {
				break
			}
			if _, _, err := readHS(nc, hsChallenge); err != nil {
				return err
			}
		}
		got, err := io.ReadAll(nc)
		if err != nil || len(got) == 0 {
			return io.EOF
		}
		m, err := decodeHS(got[:min(len(got), hsSize)])
		if err != nil {
			return err
		}
		return refusal(m.Status)
	}
	hello := standIn(t, 0, 3, nil).ourMsg(hsHello, 2, 0)
	other := hello
	other.Version = protoVersion + 1
	wrongRank := hello
	wrongRank.From, wrongRank.To = 2, 2
	return []stranger{
		{"wrong secret", func() error { return dialHS(func(c *Config) { c.Secret = bytes.Repeat([]byte{0x5a}, 32) }) }, ErrAuth, ErrAuth},
		{"wrong group", func() error { return dialHS(func(c *Config) { c.Group = 76 }) }, ErrGroup, ErrGroup},
		{"wrong label", func() error { return dialHS(func(c *Config) { c.Label = "other" }) }, ErrLabel, ErrLabel},
		{"wrong conns", func() error { return dialHS(func(c *Config) { c.ConnsPerPeer = 2 }) }, ErrConfig, ErrConfig},
		{"wrong hello", func() error { return dialHS(func(c *Config) { c.Hello = []byte("hi") }) }, ErrConfig, ErrConfig},
		{"other version", func() error { return raw(other.encode()) }, ErrVersion, ErrVersion},
		{"wrong rank", func() error { return raw(wrongRank.encode()) }, ErrRank, ErrRank},
		{"replay", func() error { return raw(replay[:hsSize], replay[hsSize:]) }, ErrAuth, ErrAuth},
		{"garbage", func() error { return raw(bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 12)) }, io.EOF, ErrHandshake},
		{"half hello", func() error {
			nc := dial()
			_, _ = nc.Write(hello.encode()[:40])
			return nc.Close()
		}, nil, nil},
		{"silent", func() error {
			nc := dial() // the acceptor gives up after HandshakeTimeout
			defer nc.Close()
			if got, _ := io.ReadAll(nc); len(got) > 0 {
				return errors.New("a silent client got an answer")
			}
			return nil
		}, nil, os.ErrDeadlineExceeded},
	}
}

// A second authenticated connection in a link's place while the mesh
// forms replaces the first (its dialer dials again only when it took the
// first for failed: its end broke after the acceptor's verdict): the
// acceptor closes the first and the mesh keeps the newer, refusing
// nothing.
func TestRedialReplaces(t *testing.T) {
	eachNet(t, func(t *testing.T, k netKind) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cfgs, addrs := group(t, k, 2)
		var why error
		cfgs[1].ConnsPerPeer = 2
		cfgs[1].OnRefused = func(err error) { why = err }
		acc := make(chan error, 1)
		var m1 *Mesh
		go func() {
			var err error
			m1, err = Connect(ctx, cfgs[1])
			acc <- err
		}()
		b0 := standIn(t, 0, 2, func(c *Config) { c.ConnsPerPeer = 2 })
		link := func(i int) Link {
			nc, err := k.dial(ctx, addrs[1])
			if err != nil {
				t.Fatal(err)
			}
			_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
			l, err := b0.dialHandshake(nc, 1, i)
			if err != nil {
				t.Fatal(err)
			}
			_ = nc.SetDeadline(time.Time{})
			return l
		}
		stale := link(0)
		defer stale.Conn.Close()
		first, second := link(0), link(1)
		defer first.Conn.Close()
		defer second.Conn.Close()
		if err := <-acc; err != nil {
			t.Fatal(err)
		}
		defer m1.Close()
		if m1.Refused != 0 || why != nil {
			t.Errorf("refused %d (the last as %v), want none", m1.Refused, why)
		}
		_ = stale.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := stale.Conn.Read(make([]byte, 1)); err == nil {
			t.Errorf("the replaced connection is still open (read %d bytes)", n)
		}
		for i, l := range []Link{first, second} {
			mine := m1.Links[0][i].Conn
			_ = mine.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := mine.Write([]byte{'b'}); err != nil {
				t.Fatal(err)
			}
			if err := roundTrip(l.Conn, "a", "b"); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 1)
			if _, err := io.ReadFull(mine, got); err != nil || got[0] != 'a' {
				t.Fatalf("link %d: read %q, %v", i, got, err)
			}
		}
	})
}

// A dialer facing an acceptor that does not know the secret (it answers
// the challenge, and then a verdict with a MAC of its own) refuses it.
func TestImpostorAcceptorRefused(t *testing.T) {
	b0 := standIn(t, 0, 2, nil)
	a, c := net.Pipe()
	defer a.Close()
	defer c.Close()
	go func() {
		imp := standIn(t, 1, 2, func(cfg *Config) { cfg.Secret = bytes.Repeat([]byte{1}, 32) })
		if _, _, err := readHS(c, hsHello); err != nil {
			return
		}
		ch := imp.ourMsg(hsChallenge, 0, 0)
		_, _ = c.Write(ch.encode())
		if _, _, err := readHS(c, hsProof); err != nil {
			return
		}
		v := hsMsg{Version: protoVersion, Kind: hsVerdict, Nonce: nonce()}
		_, _ = c.Write(v.encode())
	}()
	_ = a.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := b0.dialHandshake(a, 1, 0); !errors.Is(err, ErrAuth) {
		t.Fatalf("an impostor's verdict: %v, want ErrAuth", err)
	}
}
