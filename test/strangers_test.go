package test

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/actors/remoting"
	"github.com/choreo-gpu/choreo/collectives/cluster"
	"github.com/choreo-gpu/choreo/wire"
)

// TestStrangersRefused: while a 2-process cluster all-reduces, its
// control planes get garbage bytes, a handshake proving a wrong secret, a
// control connection of rank 0 recorded on the wire and replayed, and
// hellos with the right secret from a rank of another run and from a
// second process claiming a rank that is taken. The garbage, the wrong
// secret and the replay are refused at the connection's handshake (the
// rank logs the wrong proofs: "authentication failed"), the other run's
// hello with a Refused answer, and the claim on a taken rank is kept
// waiting (a roster of group 0: it would take the rank only if the group
// lost it and grew back) without displacing the rank; no rank dies, and
// every collective completes correctly.
func TestStrangersRefused(t *testing.T) {
	c := newCluster(t, 2, "auto")
	ranks := c.startAll("--verbose", "check", "soak", "--size", "1MiB", "--iters", "1500") // long enough to outlast the attacks
	for _, k := range ranks {
		if _, ok := k.await(2*time.Minute, "SOAK 2"); !ok {
			t.Fatalf("rank %d never got going:\n%s", k.r, k.text())
		}
	}
	secret, run := envOf(c, "CHOREO_SECRET"), envOf(c, "CHOREO_RUN")

	// A stranger with the group's secret: its own runtime (one remote in
	// this process), with a node that records what the cluster answers. It
	// advertises a recording proxy, so the ranks' connections to it are
	// kept as they crossed the wire.
	listen := freePort(t)
	px := startRecorder(t, listen)
	rt, err := actors.NewRuntime()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Close() }()
	rem, err := remoting.Start(rt, remoting.Config{Addr: listen, Advertise: px.addr, Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	answers := make(chan *wire.Refused, 4)
	waits := make(chan *wire.Roster, 16)
	_, err = rt.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *wire.Refused:
			answers <- m
		case *wire.Roster:
			select {
			case waits <- m:
			default:
			}
		}
	}), cluster.Name)
	if err != nil {
		t.Fatal(err)
	}

	// A rank logs what strangers cause at Warn at most once a second (the
	// rest at Debug): each kind of refusal below comes a second apart, so
	// that each shows.
	for _, h := range c.hosts {
		garbage(t, h)
	}
	time.Sleep(1100 * time.Millisecond)
	for _, h := range c.hosts {
		if ans := handshake(t, h, []byte("not the group's secret at all"), "127.0.0.1:1"); ans != refused {
			t.Errorf("%s: a handshake with a wrong secret got %s, want a refusal", h, ans)
		}
	}
	rank0 := actor.NewPID(c.hosts[0], cluster.Name)
	me := rem.Address()
	stale := &wire.Hello{Rank: 1, Size: 2, ControlAddr: me, Run: "an older run", Version: cluster.Version, Pid: 1}
	taken := &wire.Hello{Rank: 1, Size: 2, ControlAddr: me, Run: run, Version: cluster.Version, Pid: 1}
	rt.ActorSystem().Root.Send(rank0, stale)
	select {
	case m := <-answers:
		t.Logf("refused: %s", m.GetReason())
	case <-time.After(10 * time.Second):
		t.Fatalf("no Refused answer to %v", stale)
	}
	rt.ActorSystem().Root.Send(rank0, taken)
	select {
	case m := <-waits:
		if m.GetGroup() != 0 || len(m.GetMembers()) != 2 || m.GetMembers()[1].GetControlAddr() != "" || m.GetMembers()[1].GetDataAddr() != "" {
			t.Fatalf("the claim on a taken rank got roster %v, want one of group 0 (wait) naming the 2 members' ranks alone", m)
		}
		t.Logf("the claim on a taken rank waits: %v", m)
	case m := <-answers:
		t.Fatalf("the claim on a taken rank was refused (%s), want it kept waiting", m.GetReason())
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer to %v", taken)
	}

	// rank 0's connection to the stranger (its handshake and the Refused
	// answers), replayed to each rank: refused at the handshake
	rec := px.recorded()
	if len(rec) < 100 {
		t.Fatalf("only %d bytes recorded of rank 0's connection", len(rec))
	}
	time.Sleep(1100 * time.Millisecond)
	for _, h := range c.hosts {
		if got := replay(t, h, rec); got != refused {
			t.Errorf("%s: the replayed connection got %s, want a refusal", h, got)
		}
	}

	// The soak runs about a minute under -race alone, twice that beside
	// two busy loops: the bound is for a rank that hangs.
	for _, k := range ranks {
		if !k.exited(5 * time.Minute) {
			t.Fatalf("rank %d did not finish:\n%s", k.r, k.text())
		}
		m := done.FindStringSubmatch(k.text())
		if k.exitCode() != 0 || m == nil || m[2] != "0" || !strings.Contains(k.text(), "CHECK soak ok") {
			t.Fatalf("rank %d (exit %d):\n%s", k.r, k.exitCode(), k.text())
		}
		// the wrong secret and the replay, each logged with the address it came from
		if n := strings.Count(k.text(), "authentication failed"); n < 2 {
			t.Errorf("rank %d logged %d authentication failures, want 2:\n%s", k.r, n, k.text())
		}
	}
}

// envOf is a variable of the cluster's common environment.
func envOf(c *procs, name string) string {
	for _, kv := range c.common {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// garbage writes random bytes to addr and waits (bounded) for the far end
// to close the connection.
func garbage(t *testing.T, addr string) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nc.Close() }()
	b := make([]byte, 4096)
	_, _ = rand.Read(b)
	b[0] = 0xff // never the handshake's version byte
	_, _ = nc.Write(b)
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, err := nc.Read(b); err != nil {
			return
		}
	}
}

// The control handshake as documented in actors (remote_handshake.go),
// written out here from the documentation, so the test checks the wire
// format and not only the code against itself.
const (
	hsVersion = 3
	hsReply   = 32 + 32 // the server's nonce and proof
	hsAccept  = 1
)

// answer is what a server sent after a client's message.
type answer string

const (
	refused  answer = "a refusal"
	accepted answer = "an acceptance"
)

// handshake runs the client side of the control handshake against addr,
// proving key and claiming the address claim, and returns the server's
// answer (or what went wrong instead).
func handshake(t *testing.T, addr string, key []byte, claim string) answer {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nc.Close() }()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	cn := make([]byte, 32)
	_, _ = rand.Read(cn)
	hello := append(append(append([]byte{hsVersion}, cn...), byte(len(claim))), claim...)
	if _, err := nc.Write(hello); err != nil {
		return answer(fmt.Sprintf("a write error (%v)", err))
	}
	reply := make([]byte, hsReply)
	if _, err := io.ReadFull(nc, reply); err != nil {
		return answer(fmt.Sprintf("a reply of %x (%v)", reply, err))
	}
	// the server's proof is not checked: the point is what the server
	// makes of this client's proof
	m := hmac.New(sha256.New, key)
	m.Write([]byte("choreo control v3 client proof"))
	m.Write(reply[:32])
	m.Write(cn)
	m.Write([]byte{byte(len(claim))})
	m.Write([]byte(claim))
	if _, err := nc.Write(append([]byte{hsAccept}, m.Sum(nil)...)); err != nil {
		return answer(fmt.Sprintf("a write error (%v)", err))
	}
	return readAnswer(nc)
}

// readAnswer reads a server's answer byte and, for a refusal, checks that
// the server closes the connection after it (with a reset where it left
// bytes of ours unread).
func readAnswer(nc net.Conn) answer {
	rest, err := io.ReadAll(nc) // bounded by the connection's deadline
	switch {
	case len(rest) == 1 && rest[0] == 0 && (err == nil || errors.Is(err, syscall.ECONNRESET)):
		return refused
	case len(rest) > 0 && rest[0] == 1:
		return accepted
	}
	return answer(fmt.Sprintf("%x (%v)", rest, err))
}

// replay writes rec, a client's bytes recorded on the wire, to a fresh
// connection to addr, and returns the server's answer.
func replay(t *testing.T, addr string, rec []byte) answer {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nc.Close() }()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = nc.Write(rec) // the server stops reading at the proof: the rest may be cut short
	reply := make([]byte, hsReply)
	if _, err := io.ReadFull(nc, reply); err != nil {
		return answer(fmt.Sprintf("no reply (%v)", err))
	}
	return readAnswer(nc)
}

// freePort is a loopback address free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// recorder is a TCP proxy to a fixed address that keeps what the client
// of its first connection sent.
type recorder struct {
	addr string
	mu   sync.Mutex
	rec  []byte
}

func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	r.rec = append(r.rec, b...)
	r.mu.Unlock()
	return len(b), nil
}

func (r *recorder) recorded() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.rec...)
}

// startRecorder proxies connections to to until the test ends, recording
// the first one's client bytes.
func startRecorder(t *testing.T, to string) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for first := true; ; first = false {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", to)
			if err != nil {
				_ = in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			var up io.Writer = out
			if first {
				up = io.MultiWriter(out, r)
			}
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(up, in); _ = out.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return r
}
