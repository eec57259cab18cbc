package test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/collectives/cluster"
	"github.com/choreo-gpu/choreo/wire"
)

// TestStrangersRefused: while a 2-process cluster all-reduces, its
// control planes get garbage bytes, a stream with a wrong secret, and
// hellos with the right secret from a rank of another run and from a
// second process claiming a rank that is taken. Each is refused (the
// hellos with a Refused answer), no rank dies, and every collective
// completes correctly.
func TestStrangersRefused(t *testing.T) {
	c := newCluster(t, 2, "auto")
	ranks := c.startAll("check", "soak", "--size", "1MiB", "--iters", "300")
	for _, k := range ranks {
		if _, ok := k.await(2*time.Minute, "SOAK 2"); !ok {
			t.Fatalf("rank %d never got going:\n%s", k.r, k.text())
		}
	}
	secret, run := envOf(c, "CHOREO_SECRET"), envOf(c, "CHOREO_RUN")

	// A stranger with the group's secret: its own runtime (one remote in
	// this process), with a node that records what the cluster answers.
	rt, err := actors.NewRuntime(actors.WithRemote(actors.RemoteConfig{Addr: "127.0.0.1:0", Secret: []byte(secret)}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Close() }()
	answers := make(chan *wire.Refused, 4)
	_, err = rt.ActorSystem().Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*wire.Refused); ok {
			answers <- m
		}
	}), cluster.Name)
	if err != nil {
		t.Fatal(err)
	}

	for _, h := range c.hosts {
		garbage(t, h)
		if code := wrongSecret(t, h); code != codes.Unauthenticated {
			t.Errorf("%s: a stream with a wrong secret ended with %v, want Unauthenticated", h, code)
		}
	}
	rank0 := actor.NewPID(c.hosts[0], cluster.Name)
	stale := &wire.Hello{Rank: 1, Size: 2, ControlAddr: rt.Remote().Address(), Run: "an older run",
		Version: cluster.Version, Pid: 1}
	taken := &wire.Hello{Rank: 1, Size: 2, ControlAddr: rt.Remote().Address(), Run: run, Version: cluster.Version, Pid: 1}
	for _, h := range []*wire.Hello{stale, taken} {
		rt.ActorSystem().Root.Send(rank0, h)
		select {
		case m := <-answers:
			t.Logf("refused: %s", m.GetReason())
		case <-time.After(10 * time.Second):
			t.Fatalf("no Refused answer to %v", h)
		}
	}

	for _, k := range ranks {
		if !k.exited(2 * time.Minute) {
			t.Fatalf("rank %d did not finish:\n%s", k.r, k.text())
		}
		m := done.FindStringSubmatch(k.text())
		if k.exitCode() != 0 || m == nil || m[2] != "0" || !strings.Contains(k.text(), "CHECK soak ok") {
			t.Fatalf("rank %d (exit %d):\n%s", k.r, k.exitCode(), k.text())
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
	_, _ = nc.Write(b)
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, err := nc.Read(b); err != nil {
			return
		}
	}
}

// wrongSecret opens a remoting stream to addr proving another secret,
// sends a message, and returns the code the stream ends with.
func wrongSecret(t *testing.T, addr string) codes.Code {
	t.Helper()
	cc, err := grpc.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	m := hmac.New(sha256.New, []byte("not the group's secret at all"))
	m.Write([]byte("choreo control v1"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "choreo-auth", hex.EncodeToString(m.Sum(nil)))
	s, err := remote.NewRemotingClient(cc).Receive(ctx)
	if err != nil {
		return status.Code(err)
	}
	data, _ := proto.Marshal(&wire.Leave{Rank: 0, Reason: "stranger"})
	_ = s.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		TypeNames: []string{"choreo.wire.Leave"},
		Targets:   []*actor.PID{actor.NewPID(addr, cluster.Name)},
		Envelopes: []*remote.MessageEnvelope{{MessageData: data}},
	}}})
	for {
		if _, err := s.Recv(); err != nil {
			return status.Code(err)
		}
	}
}
