package actors_test

// R21: the control plane is closed to strangers. Raw gRPC clients (the
// Remoting client protoactor generates) send what a stray or hostile peer
// could; no runtime dies, and each keeps serving its group.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/choreo-gpu/choreo/wire"
)

// token is the proof a client of the group presents, computed here from
// the documented formula rather than taken from the package.
func token(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("choreo control v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// rawClient dials p's remoting with a plain gRPC client; with a key, every
// call carries its token.
func rawClient(t *testing.T, p *peer, key []byte) (remote.RemotingClient, context.Context) {
	t.Helper()
	cc, err := grpc.Dial(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	if key != nil {
		ctx = metadata.AppendToOutgoingContext(ctx, "choreo-auth", token(key))
	}
	return remote.NewRemotingClient(cc), ctx
}

// batch is a MessageBatch of one message of type name to p's echo.
func batch(p *peer, name string, data []byte) *remote.RemoteMessage {
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		TypeNames: []string{name},
		Targets:   []*actor.PID{actor.NewPID(p.addr, "echo")},
		Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: data}},
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

func TestRemoteRefusesUnauthenticatedClient(t *testing.T) {
	noLeaks(t)
	a, b := startPeer(t, "node", 0, secret), startPeer(t, "node", 1, secret)
	c, ctx := rawClient(t, a, nil)
	if code := sendOnStream(t, c, ctx, batch(a, "no.such.Type", []byte{1, 2, 3})); code != codes.Unauthenticated {
		t.Fatalf("unauthenticated stream ended with %v, want Unauthenticated", code)
	}
	if _, err := c.ListProcesses(ctx, &remote.ListProcessesRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("unauthenticated ListProcesses: %v", err)
	}
	wrong, wctx := rawClient(t, a, []byte("not the group's secret at all"))
	if code := sendOnStream(t, wrong, wctx, batch(a, "choreo.wire.Ping", marshal(t, &wire.Ping{Nonce: 9}))); code != codes.Unauthenticated {
		t.Fatalf("wrong-token stream ended with %v, want Unauthenticated", code)
	}
	for range 3 {
		a.expect("WARN") // the refusals, logged
	}
	if n := a.saw("refused an unauthenticated client"); n != 3 {
		t.Fatalf("%d refusals logged, want 3", n)
	}
	a.ping(b, 1, 1) // still serves
	b.ping(a, 2, 0)
	if a.line("got-ping 9") != 0 {
		t.Fatal("a refused stream delivered its message")
	}
	a.close()
	b.close()
}

func TestRemoteSurvivesBadAuthenticatedClient(t *testing.T) {
	noLeaks(t)
	a, b := startPeer(t, "node", 0, secret), startPeer(t, "node", 1, secret)
	c, ctx := rawClient(t, a, secret)

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
	// a Terminated without Who: protoactor's reader panics on it
	if code := sendOnStream(t, c, ctx, batch(a, "actor.Terminated", marshal(t, &actor.Terminated{}))); code != codes.Internal {
		t.Fatalf("panicking batch ended the stream with %v, want Internal", code)
	}
	// handlers that are panic("implement me") at this protoactor version
	if _, err := c.ListProcesses(ctx, &remote.ListProcessesRequest{}); status.Code(err) != codes.Internal {
		t.Fatalf("ListProcesses: %v, want Internal", err)
	}
	if _, err := c.GetProcessDiagnostics(ctx, &remote.GetProcessDiagnosticsRequest{}); status.Code(err) != codes.Internal {
		t.Fatalf("GetProcessDiagnostics: %v, want Internal", err)
	}
	for range 5 {
		a.expect("WARN")
	}
	if n, m := a.saw("refused a message"), a.saw("panicked"); n != 2 || m != 3 {
		t.Fatalf("%d refused messages and %d recovered panics logged, want 2 and 3", n, m)
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

func TestRemoteWrongSecretCannotDeliver(t *testing.T) {
	noLeaks(t)
	a := startPeer(t, "node", 0, secret)
	m := startPeer(t, "node", 9, []byte("another group's secret, 32 bytes"))
	m.do("watch")
	for i := 1; i <= 3; i++ {
		m.do(fmt.Sprintf("ping %s %d", a.addr, i))
	}
	// m's connect is refused; protoactor reports the endpoint lost (after
	// its 2 s retry sleep) and drops what was queued for it
	if l := m.expect("terminated "); l != "terminated "+a.addr {
		t.Fatalf("%q, want terminated %s", l, a.addr)
	}
	a.expect("WARN")
	if a.saw("refused an unauthenticated client") == 0 {
		t.Fatal("the refusal was not logged")
	}
	b := startPeer(t, "node", 1, secret)
	b.ping(a, 100, 0) // the group still works
	a.ping(b, 101, 1)
	for i := 1; i <= 3; i++ {
		if a.line(fmt.Sprintf("got-ping %d", i)) != 0 || m.saw("pong") != 0 {
			t.Fatalf("a message crossed groups:\n%s", a.out.String())
		}
	}
	a.close()
	b.close()
	m.close()
	if a.saw("got-ping") != 1 {
		t.Fatalf("a saw %d pings, want 1", a.saw("got-ping"))
	}
}
