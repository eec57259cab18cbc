package remoting_test

// Remoting tests run each remoting runtime in a process of its own, as a
// cluster does: protoactor's Start sets grpc-go's process-wide logger
// (remote/server.go, grpclog.SetLoggerV2, documented as "not
// mutex-protected, call before any gRPC function"), so a second remote in
// one process races with the first one's gRPC goroutines under -race. The
// test process itself only speaks raw gRPC and drives its peers over
// stdin/stdout (peerMain is the other side).

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/actors/remoting"
	"github.com/choreo-gpu/choreo/wire"
)

// bound is every wait's bound in these tests: generous, since a loaded
// machine may be slow, and never a timing assertion.
const bound = 20 * time.Second

var secret = []byte("0123456789abcdef-group-secret")

const (
	peerEnv        = "CHOREO_REMOTE_PEER"         // the child's mode: "node" or "errors"
	peerTimeoutEnv = "CHOREO_REMOTE_PEER_TIMEOUT" // the child's Config.PeerTimeout, if set
)

// noLeaks fails the test when goroutines it started outlive it; call it
// first, so it runs after every other cleanup.
func noLeaks(t *testing.T) {
	t.Helper()
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { verifyNone(t, leaks) })
}

// verifyNone fails when goroutines other than opts' are left once they
// had bound to end (goleak's own retries last under a second, and
// protoactor's dead-letter throttle keeps a goroutine for its 1 s period).
func verifyNone(t *testing.T, opts ...goleak.Option) {
	t.Helper()
	for deadline := time.Now().Add(bound); goleak.Find(opts...) != nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	goleak.VerifyNone(t, opts...)
}

// peer is a child process running one runtime with remoting on loopback
// (see peerMain for what it answers).
type peer struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string // stdout, closed at EOF
	out   *syncBuffer // stdout and stderr, for failure reports
	exit  chan error  // the process's exit
	addr  string

	pending []string // read, not yet matched by expect
	seen    []string // every line read
}

// syncBuffer collects a child's output from two goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startPeer starts a child in mode with the given rank and secret and, in
// mode "node", waits for its address; env is added to its environment.
func startPeer(t *testing.T, mode string, rank int, key []byte, env ...string) *peer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRemotePeerProcess$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), peerEnv+"="+mode, "CHOREO_PEER_RANK="+strconv.Itoa(rank), "CHOREO_PEER_SECRET="+hex.EncodeToString(key)), env...)
	p := &peer{t: t, name: fmt.Sprintf("rank %d", rank), cmd: cmd, lines: make(chan string, 1024), out: &syncBuffer{}, exit: make(chan error, 1)}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = p.out
	p.in = in
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = p.out.Write(append(sc.Bytes(), '\n'))
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.exit <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.in.Close() // the child closes its runtime at EOF
		select {
		case <-p.exit:
		case <-time.After(bound):
			_ = p.cmd.Process.Kill()
			<-p.exit
			t.Errorf("%s did not exit; output:\n%s", p.name, p.out.String())
		}
	})
	if mode == "node" {
		p.addr = strings.TrimPrefix(p.expect("addr "), "addr ")
	}
	return p
}

// do sends the child a command and waits for its "ok".
func (p *peer) do(cmd string) {
	p.t.Helper()
	if _, err := fmt.Fprintln(p.in, cmd); err != nil {
		p.t.Fatalf("%s: %s: %v", p.name, cmd, err)
	}
	p.expect("ok " + cmd)
}

// expect waits for a line starting with prefix and returns it.
func (p *peer) expect(prefix string) string {
	p.t.Helper()
	for i, l := range p.pending {
		if strings.HasPrefix(l, prefix) {
			p.pending = append(p.pending[:i], p.pending[i+1:]...)
			return l
		}
	}
	timeout := time.After(bound)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("%s exited waiting for %q; output:\n%s", p.name, prefix, p.out.String())
			}
			p.seen = append(p.seen, l)
			if strings.HasPrefix(l, prefix) {
				return l
			}
			p.pending = append(p.pending, l)
		case <-timeout:
			p.t.Fatalf("%s: no %q; output:\n%s", p.name, prefix, p.out.String())
		}
	}
}

// awaitWarn waits for a Warn line containing s (bounded by expect's bound
// on each line).
func (p *peer) awaitWarn(s string) {
	p.t.Helper()
	for p.saw(s) == 0 {
		p.expect("WARN")
	}
}

// saw counts the lines read so far that contain s.
func (p *peer) saw(s string) int {
	n := 0
	for _, l := range p.seen {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// line counts the lines read so far that equal l.
func (p *peer) line(l string) int {
	n := 0
	for _, s := range p.seen {
		if s == l {
			n++
		}
	}
	return n
}

// ping has p's probe ping to's echo and waits for both ends to see it.
func (p *peer) ping(to *peer, nonce int, toRank int) {
	p.t.Helper()
	p.do(fmt.Sprintf("ping %s %d", to.addr, nonce))
	to.expect(fmt.Sprintf("got-ping %d", nonce))
	p.expect(fmt.Sprintf("pong %d %d", nonce, toRank))
}

// close closes the child's runtime and checks that it exits cleanly (no
// race report, no leaked goroutine, no panic).
func (p *peer) close() {
	p.t.Helper()
	p.do("close")
	if l := p.expect("closed"); l != "closed" {
		p.t.Errorf("%s: %s", p.name, l)
	}
	p.wait()
}

// wait checks that the child exits with status 0.
func (p *peer) wait() {
	p.t.Helper()
	select {
	case err := <-p.exit:
		p.exit <- err // for the cleanup
		if err != nil {
			p.t.Fatalf("%s exited with %v; output:\n%s", p.name, err, p.out.String())
		}
	case <-time.After(bound):
		p.t.Fatalf("%s did not exit; output:\n%s", p.name, p.out.String())
	}
}

func TestRemotePingPongBothWays(t *testing.T) {
	noLeaks(t)
	a, b := startPeer(t, "node", 0, secret), startPeer(t, "node", 1, secret)
	if a.addr == b.addr || !strings.HasPrefix(a.addr, "127.0.0.1:") || strings.HasSuffix(a.addr, ":0") {
		t.Fatalf("addresses %q and %q", a.addr, b.addr)
	}
	a.ping(b, 1, 1)
	b.ping(a, 2, 0)
	a.ping(b, 3, 1)
	a.close()
	b.close()
}

func TestRemoteEndpointTerminatedOnPeerClose(t *testing.T) {
	noLeaks(t)
	a, b := startPeer(t, "node", 0, secret), startPeer(t, "node", 1, secret)
	a.ping(b, 1, 1) // both directions connected
	a.do("watch")
	a.do("watch-cancelled")
	b.close()
	if l := a.expect("terminated "); l != "terminated "+b.addr {
		t.Fatalf("%q, want terminated %s", l, b.addr)
	}
	if a.saw("cancelled-fired") != 0 {
		t.Fatal("a cancelled OnEndpointTerminated callback ran")
	}
	a.close()
}

func TestStartErrors(t *testing.T) {
	noLeaks(t)
	startPeer(t, "errors", 0, secret).wait()
}

// TestRemotePeerProcess is the child of the remote tests; it skips when
// run on its own.
func TestRemotePeerProcess(t *testing.T) {
	switch os.Getenv(peerEnv) {
	case "":
		t.Skip("the remote tests' child process")
	case "node":
		peerMain(t)
	case "errors":
		startErrors(t)
	}
}

// lineWriter writes whole lines to stdout from any goroutine.
type lineWriter struct{ mu sync.Mutex }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return os.Stdout.Write(p)
}

func (w *lineWriter) println(a ...any) { _, _ = fmt.Fprintln(w, a...) }

// peerMain runs a runtime with remoting (rank, secret and peer timeout
// from the environment), an actor "echo" that answers each wire.Ping with
// a wire.Pong (printing "got-ping N"), an actor "probe" that prints
// "pong N RANK" for each Pong, and an actor "watcher" that prints
// "actor-terminated ADDR/ID WHY" for each Terminated it gets, and logs
// Warn and above to stdout. It prints "addr ADDRESS", then serves commands
// from stdin, each answered "ok CMD" once done: "ping ADDR N" (probe pings
// ADDR's echo), "watch" (print "terminated ADDR" on each
// EndpointTerminatedEvent), "watch-cancelled" (a callback cancelled at
// once; prints "cancelled-fired" if it ever runs), "watch-actor ADDR"
// (watcher watches ADDR's echo), "stop-echo" (stops the echo actor),
// "authfailure" (prints "authfailure ISAUTH ERR" from Remote.AuthFailures),
// "stats" (prints "stats " and processStats), "close" (prints
// "closed" or "closed: ERR"). At "close" or EOF it closes the runtime and
// checks that no goroutine is left.
func peerMain(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	out := &lineWriter{}
	rank, _ := strconv.Atoi(os.Getenv("CHOREO_PEER_RANK"))
	key, _ := hex.DecodeString(os.Getenv("CHOREO_PEER_SECRET"))
	enc := zap.NewDevelopmentEncoderConfig()
	enc.TimeKey, enc.CallerKey = "", ""
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(out), zapcore.WarnLevel))
	pt, _ := time.ParseDuration(os.Getenv(peerTimeoutEnv))
	rt, err := actors.NewRuntime(actors.WithLogger(log), actors.WithName(fmt.Sprintf("rank%d", rank)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remoting.Start(rt, remoting.Config{Addr: "127.0.0.1:0", Secret: key, PeerTimeout: pt}); err != nil {
		t.Fatal(err)
	}
	sys := rt.ActorSystem()
	if got := sys.Address(); got != remoting.Of(rt).Address() {
		t.Errorf("system address %q, remote address %q", got, remoting.Of(rt).Address())
	}
	if _, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if p, ok := c.Message().(*wire.Ping); ok {
			out.println("got-ping", p.Nonce)
			c.Respond(&wire.Pong{Nonce: p.Nonce, Rank: uint32(rank)})
		}
	}), "echo"); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if p, ok := c.Message().(*wire.Pong); ok {
			out.println("pong", p.Nonce, p.Rank)
		}
	}), "probe"); err != nil {
		t.Fatal(err)
	}
	watcher, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Terminated:
			out.println("actor-terminated", m.Who.Address+"/"+m.Who.Id, m.Why)
		case *actor.PID:
			c.Watch(m)
		}
	}), "watcher")
	if err != nil {
		t.Fatal(err)
	}
	out.println("addr", remoting.Of(rt).Address())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "ping":
			n, _ := strconv.ParseUint(f[2], 10, 64)
			sys.Root.RequestWithCustomSender(actor.NewPID(f[1], "echo"), &wire.Ping{Nonce: n}, sys.NewLocalPID("probe"))
		case "watch":
			remoting.Of(rt).OnEndpointTerminated(func(addr string) { out.println("terminated", addr) })
		case "watch-cancelled":
			remoting.Of(rt).OnEndpointTerminated(func(string) { out.println("cancelled-fired") })()
		case "watch-actor":
			sys.Root.Send(watcher, actor.NewPID(f[1], "echo"))
		case "stop-echo":
			if err := sys.Root.StopFuture(sys.NewLocalPID("echo")).Wait(); err != nil {
				t.Fatal(err)
			}
		case "authfailure":
			_, err := remoting.Of(rt).AuthFailures()
			out.println("authfailure", errors.Is(err, remoting.ErrAuth), err)
		case "stats":
			out.println("stats", processStats())
		case "close":
			out.println("ok", sc.Text())
			closeAndCheck(t, rt, out, leaks)
			return
		default:
			t.Fatalf("unknown command %q", sc.Text())
		}
		out.println("ok", sc.Text())
	}
	closeAndCheck(t, rt, out, leaks)
}

func closeAndCheck(t *testing.T, rt *actors.Runtime, out *lineWriter, leaks goleak.Option) {
	if err := rt.Close(); err != nil {
		out.println("closed:", err)
	} else {
		out.println("closed")
	}
	verifyNone(t, leaks)
}

// startErrors checks Start's refusals in a process of its own (it
// starts remoting once).
func startErrors(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	rt, err := actors.NewRuntime()
	if err != nil {
		t.Fatal(err)
	}
	if remoting.Of(rt) != nil {
		t.Fatal("Of not nil before Start")
	}
	for _, cfg := range []remoting.Config{
		{Addr: "127.0.0.1:0", Secret: secret[:15]},
		{Addr: "127.0.0.1", Secret: secret},
		{Addr: "127.0.0.1:99999", Secret: secret},
		{Addr: ":0", Secret: secret},
		{Addr: "0.0.0.0:0", Secret: secret},
		{Addr: "127.0.0.1:0", Advertise: "nohost", Secret: secret},
		{Addr: "127.0.0.1:0", Secret: secret, BatchSize: -1},
	} {
		if _, err := remoting.Start(rt, cfg); !errors.Is(err, remoting.ErrBadArgument) {
			t.Errorf("Start(%+v): %v, want ErrBadArgument", cfg, err)
		}
	}
	if _, err := remoting.Start(nil, remoting.Config{Addr: "127.0.0.1:0", Secret: secret}); !errors.Is(err, remoting.ErrBadArgument) {
		t.Errorf("Start on a nil runtime: %v", err)
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, err = remoting.Start(rt, remoting.Config{Addr: taken.Addr().String(), Secret: secret})
	if err == nil || errors.Is(err, remoting.ErrBadArgument) || !strings.Contains(err.Error(), "listen") {
		t.Errorf("Start on a taken port: %v", err)
	}
	_ = taken.Close()
	if remoting.Of(rt) != nil {
		t.Fatal("Of set after a failed start")
	}

	// the refusals left the runtime able to start remoting, once
	r, err := remoting.Start(rt, remoting.Config{Addr: "127.0.0.1:0", Advertise: "localhost:0", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if remoting.Of(rt) != r || !strings.HasPrefix(r.Address(), "localhost:") || strings.HasSuffix(r.Address(), ":0") {
		t.Errorf("Of %p (want %p), address %q", remoting.Of(rt), r, r.Address())
	}
	if _, err := remoting.Start(rt, remoting.Config{Addr: "127.0.0.1:0", Secret: secret}); !errors.Is(err, remoting.ErrBadArgument) {
		t.Errorf("second Start: %v", err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := remoting.Start(rt, remoting.Config{Addr: "127.0.0.1:0", Secret: secret}); !errors.Is(err, remoting.ErrClosed) {
		t.Errorf("Start on a closed runtime: %v", err)
	}
	verifyNone(t, leaks)
}

// processStats is "RSS_BYTES PEAK_RSS_BYTES FDS HEAP_BYTES STACK_BYTES" of
// this process.
func processStats() string {
	rss, peak := int64(-1), int64(-1)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				rss = kb << 10
			case "VmHWM:":
				peak = kb << 10
			}
		}
	}
	fds := -1
	if es, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = len(es)
	}
	// What the process still holds, not garbage a collection would free:
	// a collection first (the second frees the stacks of goroutines the
	// first found dead).
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return fmt.Sprintf("%d %d %d %d %d", rss, peak, fds, ms.HeapInuse, ms.StackInuse)
}
