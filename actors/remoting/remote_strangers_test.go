package remoting_test

// The control plane is closed to strangers, and a peer speaks only in its
// own name. Raw gRPC clients in this process send what a stray or hostile
// client could: without the handshake, with a wrong secret, replayed, or
// authenticated but naming other nodes; no runtime dies, and each keeps
// serving its group.

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/choreo-gpu/choreo/actors/remoting"
	"github.com/choreo-gpu/choreo/wire"
)

// claim is the address the raw authenticated clients here prove in their
// handshake (nothing listens there).
const claim = "127.0.0.1:1"

// rawClient dials addr with a plain gRPC client using creds.
func rawClient(t *testing.T, addr string, creds credentials.TransportCredentials) (remote.RemotingClient, *grpc.ClientConn, context.Context) {
	t.Helper()
	cc, err := grpc.Dial(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	return remote.NewRemotingClient(cc), cc, ctx
}

// batchTo is a MessageBatch of one message of type name to target, with
// the given sender (nil for none).
func batchTo(target *actor.PID, name string, data []byte, sender *actor.PID) *remote.RemoteMessage {
	b := &remote.MessageBatch{
		TypeNames: []string{name},
		Targets:   []*actor.PID{target},
		Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: data}},
	}
	if sender != nil {
		b.Senders = []*actor.PID{sender}
		b.Envelopes[0].Sender = 1
	}
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}
}

// batch is a MessageBatch of one message of type name to p's echo.
func batch(p *peer, name string, data []byte) *remote.RemoteMessage {
	return batchTo(actor.NewPID(p.addr, "echo"), name, data, nil)
}

// connectAs is protoactor's ConnectRequest naming addr.
func connectAs(addr string) *remote.RemoteMessage {
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "x", Address: addr}},
	}}}
}

// sendOnStream opens Remoting.Receive, sends m and returns the code the
// stream ends with (the server ends it; the wait is bounded by ctx).
func sendOnStream(t *testing.T, c remote.RemotingClient, ctx context.Context, m *remote.RemoteMessage) codes.Code {
	t.Helper()
	s, err := c.Receive(ctx)
	if err != nil {
		return status.Code(err)
	}
	_ = s.Send(m) // may fail once the server has refused; Recv says why
	for {
		if _, err := s.Recv(); err != nil {
			return status.Code(err)
		}
	}
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRemoteRefusesStrangers(t *testing.T) {
	noLeaks(t)
	a, b := startPeer(t, "node", 0, secret), startPeer(t, "node", 1, secret)

	// plain gRPC: its HTTP/2 preface is not the handshake
	c, _, ctx := rawClient(t, a.addr, insecure.NewCredentials())
	if code := sendOnStream(t, c, ctx, batch(a, "choreo.wire.Ping", marshal(t, &wire.Ping{Nonce: 9}))); code != codes.Unavailable {
		t.Fatalf("a plaintext stream ended with %v, want Unavailable", code)
	}
	if _, err := c.ListProcesses(ctx, &remote.ListProcessesRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext ListProcesses: %v, want Unavailable", err)
	}
	a.awaitWarn("not a choreo control handshake")

	// the handshake with another secret
	wrong, _, wctx := rawClient(t, a.addr, remoting.NewClientCredentials([]byte("not the group's secret at all"), claim))
	if code := sendOnStream(t, wrong, wctx, batch(a, "choreo.wire.Ping", marshal(t, &wire.Ping{Nonce: 10}))); code != codes.Unavailable {
		t.Fatalf("a wrong-secret stream ended with %v, want Unavailable", code)
	}
	a.awaitWarn("authentication failed")

	a.ping(b, 1, 1) // still serves
	b.ping(a, 2, 0)
	if a.line("got-ping 9") != 0 || a.line("got-ping 10") != 0 {
		t.Fatal("a refused client delivered its message")
	}
	a.close()
	b.close()
}

func TestRemoteSurvivesBadAuthenticatedClient(t *testing.T) {
	noLeaks(t)
	a, b := startPeer(t, "node", 0, secret), startPeer(t, "node", 1, secret)
	c, _, ctx := rawClient(t, a.addr, remoting.NewClientCredentials(secret, claim))

	// a type name this binary never linked: protoactor would dereference nil
	if code := sendOnStream(t, c, ctx, batch(a, "no.such.Type", []byte{1, 2, 3})); code != codes.InvalidArgument {
		t.Fatalf("unknown type ended the stream with %v, want InvalidArgument", code)
	}
	// an index out of range
	bad := batch(a, "choreo.wire.Ping", nil)
	bad.GetMessageBatch().Envelopes[0].Target = 5
	if code := sendOnStream(t, c, ctx, bad); code != codes.InvalidArgument {
		t.Fatalf("bad target ended the stream with %v, want InvalidArgument", code)
	}
	// a Terminated without Who: protoactor's reader would panic on it
	if code := sendOnStream(t, c, ctx, batch(a, "actor.Terminated", marshal(t, &actor.Terminated{}))); code != codes.InvalidArgument {
		t.Fatalf("a Terminated without Who ended the stream with %v, want InvalidArgument", code)
	}
	// unary calls: protoactor makes none, and its handlers panic
	if _, err := c.ListProcesses(ctx, &remote.ListProcessesRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("ListProcesses: %v, want Unimplemented", err)
	}
	if _, err := c.GetProcessDiagnostics(ctx, &remote.GetProcessDiagnosticsRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("GetProcessDiagnostics: %v, want Unimplemented", err)
	}
	for range 5 {
		a.expect("WARN")
	}
	if n, m := a.saw("refused a message"), a.saw("refused a unary call"); n != 3 || m != 2 {
		t.Fatalf("%d refused messages and %d refused calls logged, want 3 and 2", n, m)
	}
	if a.saw("no.such.Type") == 0 {
		t.Fatal("the refusal does not name the unknown type")
	}

	// a well-formed message from the same client is delivered
	s, err := c.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(batch(a, "choreo.wire.Ping", marshal(t, &wire.Ping{Nonce: 7}))); err != nil {
		t.Fatal(err)
	}
	a.expect("got-ping 7")
	_ = s.CloseSend()

	a.ping(b, 1, 1) // still serves
	b.ping(a, 2, 0)
	a.close()
	b.close()
}

// TestRemoteMessagesOnlyInOwnName: an authenticated client that proved
// the address claim cannot speak for another node (c): not as its
// connect request's address, not as a sender, not in a Terminated, Watch
// or Unwatch; and Stop and PoisonPill are refused from any peer. The
// legitimate Terminated, from the node whose actor stopped, still arrives.
func TestRemoteMessagesOnlyInOwnName(t *testing.T) {
	noLeaks(t)
	a, c := startPeer(t, "node", 0, secret), startPeer(t, "node", 2, secret)
	a.do("watch-actor " + c.addr)
	a.ping(c, 1, 2)
	cl, _, ctx := rawClient(t, a.addr, remoting.NewClientCredentials(secret, claim))
	cEcho, aEcho, aWatcher := actor.NewPID(c.addr, "echo"), actor.NewPID(a.addr, "echo"), actor.NewPID(a.addr, "watcher")
	for _, tc := range []struct {
		name string
		m    *remote.RemoteMessage
	}{
		{"connect request naming c", connectAs(c.addr)},
		{"a sender at c", batchTo(aEcho, "choreo.wire.Ping", marshal(t, &wire.Ping{Nonce: 3}), actor.NewPID(c.addr, "probe"))},
		{"Terminated for c's echo", batchTo(aWatcher, "actor.Terminated", marshal(t, &actor.Terminated{Who: cEcho, Why: actor.TerminatedReason_Stopped}), nil)},
		{"Watch by c's probe", batchTo(aEcho, "actor.Watch", marshal(t, &actor.Watch{Watcher: actor.NewPID(c.addr, "probe")}), nil)},
		{"Unwatch by c's probe", batchTo(aEcho, "actor.Unwatch", marshal(t, &actor.Unwatch{Watcher: actor.NewPID(c.addr, "probe")}), nil)},
		{"Stop", batchTo(aEcho, "actor.Stop", marshal(t, &actor.Stop{}), nil)},
		{"PoisonPill", batchTo(aEcho, "actor.PoisonPill", marshal(t, &actor.PoisonPill{}), nil)},
		{"PoisonPill from the claimed address", batchTo(aEcho, "actor.PoisonPill", marshal(t, &actor.PoisonPill{}), actor.NewPID(claim, "x"))},
	} {
		if code := sendOnStream(t, cl, ctx, tc.m); code != codes.InvalidArgument {
			t.Errorf("%s: the stream ended with %v, want InvalidArgument", tc.name, code)
		}
		a.expect("WARN")
	}
	if n := a.saw("refused a message"); n != 8 {
		t.Fatalf("%d refusals logged, want 8", n)
	}

	// in its own name it is heard: its connect request, and a sender at claim
	s, err := cl.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(connectAs(claim)); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Recv(); err != nil || m.GetConnectResponse() == nil {
		t.Fatalf("connect request in its own name: %v, %v", m, err)
	}
	if err := s.Send(batchTo(aEcho, "choreo.wire.Ping", marshal(t, &wire.Ping{Nonce: 4}), actor.NewPID(claim, "probe"))); err != nil {
		t.Fatal(err)
	}
	a.expect("got-ping 4")
	_ = s.CloseSend()

	c.ping(a, 5, 0) // a's echo survived the Stop and PoisonPill
	if a.line("got-ping 3") != 0 || a.saw("actor-terminated") != 0 {
		t.Fatalf("a refused message was delivered:\n%s", a.out.String())
	}
	// the real Terminated: c stops its echo, c tells a
	c.do("stop-echo")
	if l := a.expect("actor-terminated "); l != "actor-terminated "+c.addr+"/echo Stopped" {
		t.Fatalf("%q, want c's echo Stopped", l)
	}
	a.close()
	c.close()
}

func TestRemoteWrongSecretEitherSide(t *testing.T) {
	noLeaks(t)
	a := startPeer(t, "node", 0, secret)
	m := startPeer(t, "node", 9, []byte("another group's secret, 32 bytes"))
	a.do("authfailure")
	if l := a.expect("authfailure "); l != "authfailure false <nil>" {
		t.Fatalf("%q before any dial", l)
	}
	// m dials a: a refuses m's proof
	m.do("watch")
	for i := 1; i <= 3; i++ {
		m.do(fmt.Sprintf("ping %s %d", a.addr, i))
	}
	// m's connect is refused; protoactor reports the endpoint lost (after
	// its 2 s retry sleep) and drops what was queued for it
	if l := m.expect("terminated "); l != "terminated "+a.addr {
		t.Fatalf("%q, want terminated %s", l, a.addr)
	}
	m.do("authfailure")
	if l := m.expect("authfailure "); !strings.HasPrefix(l, "authfailure true ") || !strings.Contains(l, a.addr) || !strings.Contains(l, "authentication failed") {
		t.Fatalf("m: %q, want ErrAuth naming %s", l, a.addr)
	}
	a.awaitWarn("authentication failed")
	// a dials m: m refuses a's proof
	a.do(fmt.Sprintf("ping %s 50", m.addr))
	for deadline := time.Now().Add(bound); ; time.Sleep(50 * time.Millisecond) {
		a.do("authfailure")
		l := a.expect("authfailure ")
		if l == "authfailure false <nil>" && time.Now().Before(deadline) {
			continue
		}
		if !strings.HasPrefix(l, "authfailure true ") || !strings.Contains(l, m.addr) {
			t.Fatalf("a: %q, want ErrAuth naming %s", l, m.addr)
		}
		break
	}
	m.awaitWarn("authentication failed")

	b := startPeer(t, "node", 1, secret)
	b.ping(a, 100, 0) // the group still works
	a.ping(b, 101, 1)
	if a.line("got-ping 1") != 0 || a.line("got-ping 2") != 0 || a.line("got-ping 3") != 0 || m.line("got-ping 50") != 0 {
		t.Fatalf("a message crossed groups:\n%s\n%s", a.out.String(), m.out.String())
	}
	a.close()
	b.close()
	m.close()
}

// recordingProxy forwards one connection to addr and keeps what its
// client sent; done is closed when both directions have ended.
type recordingProxy struct {
	addr string
	mu   sync.Mutex
	sent []byte
	done chan struct{}
}

func (p *recordingProxy) Write(b []byte) (int, error) {
	p.mu.Lock()
	p.sent = append(p.sent, b...)
	p.mu.Unlock()
	return len(b), nil
}

func startRecordingProxy(t *testing.T, to string) *recordingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{addr: ln.Addr().String(), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		in, err := ln.Accept()
		_ = ln.Close()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", to)
		if err != nil {
			_ = in.Close()
			return
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _, _ = io.Copy(io.MultiWriter(out, p), in); _ = out.Close() }()
		go func() { defer wg.Done(); _, _ = io.Copy(in, out); _ = in.Close() }()
		wg.Wait()
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return p
}

// TestRemoteReplayedConnectionRefused: a whole client connection (its
// handshake and a message) recorded on the wire and replayed to the same
// server is refused at the handshake, and delivers nothing.
func TestRemoteReplayedConnectionRefused(t *testing.T) {
	noLeaks(t)
	a, b := startPeer(t, "node", 0, secret), startPeer(t, "node", 1, secret)
	px := startRecordingProxy(t, a.addr)
	c, cc, ctx := rawClient(t, px.addr, remoting.NewClientCredentials(secret, claim))
	s, err := c.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(batch(a, "choreo.wire.Ping", marshal(t, &wire.Ping{Nonce: 5}))); err != nil {
		t.Fatal(err)
	}
	a.expect("got-ping 5")
	_ = cc.Close()
	select {
	case <-px.done:
	case <-time.After(bound):
		t.Fatal("the recorded connection did not end")
	}
	px.mu.Lock()
	rec := append([]byte(nil), px.sent...)
	px.mu.Unlock()

	re, err := net.Dial("tcp", a.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = re.Close() }()
	_, _ = re.Write(rec)
	_ = re.SetReadDeadline(time.Now().Add(bound))
	got, _ := io.ReadAll(re)
	// the server's nonce and proof (32 bytes each), then a 1-byte refusal
	if len(got) != 65 || got[64] != 0 {
		t.Fatalf("the replay got %d bytes back (%x), want the server's nonce and proof and a refusal", len(got), got)
	}
	a.awaitWarn("authentication failed")
	b.ping(a, 6, 0)
	if a.line("got-ping 5") != 1 {
		t.Fatalf("the replay delivered its message again:\n%s", a.out.String())
	}
	a.close()
	b.close()
}
