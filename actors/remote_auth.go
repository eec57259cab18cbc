package actors

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// authKey is the gRPC metadata key that carries a stream's proof of the
// group's secret; authLabel is what the proof signs.
const (
	authKey   = "choreo-auth"
	authLabel = "choreo control v1"
)

// authToken is hex(HMAC-SHA256(secret, "choreo control v1")): what every
// remoting stream and call presents in its authKey metadata.
func authToken(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(authLabel))
	return hex.EncodeToString(m.Sum(nil))
}

// guard closes the control plane to strangers (R21). It sits in front of
// protoactor's gRPC server and client:
//   - every stream and call must carry the group's token (authKey), compared
//     in constant time; others are refused with Unauthenticated before
//     protoactor sees a byte;
//   - every received message batch is checked before protoactor decodes it:
//     a type name this binary has not linked, a serializer other than
//     protobuf, or an index out of range (each of which panics inside
//     protoactor at this version) refuses the stream with InvalidArgument;
//   - a handler that panics anyway (protoactor's ListProcesses and
//     GetProcessDiagnostics always do) is recovered into Internal;
//
// each refusal is logged at Warn, and the process goes on. The token is a
// static proof: it keeps strangers and stray packets out, not an
// eavesdropper who can replay it (the transport is plain TCP).
//
// The guard also tracks what Close must end: the server handlers running,
// and the client connections protoactor dialed (it leaks some); after
// close, it dials nothing more.
type guard struct {
	token []byte
	log   *zap.Logger

	mu       sync.Mutex
	closed   bool
	handlers int
	idle     chan struct{} // closed while handlers == 0
	conns    map[*grpc.ClientConn]struct{}
}

func newGuard(secret []byte, log *zap.Logger) *guard {
	idle := make(chan struct{})
	close(idle)
	return &guard{token: []byte(authToken(secret)), log: log, idle: idle, conns: map[*grpc.ClientConn]struct{}{}}
}

// errGuardClosed refuses dials and streams once remoting is closing.
var errGuardClosed = fmt.Errorf("actors: remote: %w", ErrClosed)

// admit checks ctx's token; the error is the refusal to return.
func (g *guard) admit(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	got := md.Get(authKey)
	if len(got) == 1 && subtle.ConstantTimeCompare([]byte(got[0]), g.token) == 1 {
		return nil
	}
	g.log.Warn("remote: refused an unauthenticated client", zap.String("peer", peerOf(ctx)), zap.String("method", method), zap.Int("tokens", len(got)))
	return status.Error(codes.Unauthenticated, "choreo: missing or wrong group secret")
}

// serverStream admits, checks and recovers a stream (Remoting.Receive).
func (g *guard) serverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	if err := g.admit(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	g.enter()
	defer g.leave()
	defer g.recoverInto(&err, ss.Context(), info.FullMethod)
	return handler(srv, &checkedStream{ServerStream: ss, g: g})
}

// serverUnary admits and recovers a call.
func (g *guard) serverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	if err := g.admit(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	g.enter()
	defer g.leave()
	defer g.recoverInto(&err, ctx, info.FullMethod)
	return handler(ctx, req)
}

// recoverInto turns a handler's panic into a logged Internal refusal.
func (g *guard) recoverInto(err *error, ctx context.Context, method string) {
	if p := recover(); p != nil {
		g.log.Warn("remote: refused a request whose handler panicked", zap.String("peer", peerOf(ctx)), zap.String("method", method), zap.Any("panic", p))
		*err = status.Error(codes.Internal, "choreo: request refused")
	}
}

// checkedStream checks each message protoactor reads before it sees it.
type checkedStream struct {
	grpc.ServerStream
	g *guard
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, ok := m.(*remote.RemoteMessage)
	if !ok {
		return nil
	}
	if err := checkMessage(rm); err != nil {
		s.g.log.Warn("remote: refused a message", zap.String("peer", peerOf(s.Context())), zap.Error(err))
		return status.Error(codes.InvalidArgument, "choreo: "+err.Error())
	}
	return nil
}

// checkMessage refuses what protoactor's reader would panic on.
func checkMessage(m *remote.RemoteMessage) error {
	switch t := m.MessageType.(type) {
	case *remote.RemoteMessage_ConnectRequest:
		if t.ConnectRequest.GetServerConnection() == nil {
			return errors.New("connect request without a server connection")
		}
	case *remote.RemoteMessage_MessageBatch:
		return checkBatch(t.MessageBatch)
	}
	return nil
}

func checkBatch(b *remote.MessageBatch) error {
	for i, name := range b.TypeNames {
		if _, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name)); err != nil {
			return fmt.Errorf("batch type %d: unknown message type %q", i, name)
		}
	}
	for i, p := range b.Targets {
		if p == nil {
			return fmt.Errorf("batch target %d: empty", i)
		}
	}
	for i, p := range b.Senders {
		if p == nil {
			return fmt.Errorf("batch sender %d: empty", i)
		}
	}
	for i, e := range b.Envelopes {
		switch {
		case e == nil:
			return fmt.Errorf("envelope %d: empty", i)
		case e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames):
			return fmt.Errorf("envelope %d: type %d out of range", i, e.TypeId)
		case e.Target < 0 || int(e.Target) >= len(b.Targets):
			return fmt.Errorf("envelope %d: target %d out of range", i, e.Target)
		case e.Sender < 0 || int(e.Sender) > len(b.Senders):
			return fmt.Errorf("envelope %d: sender %d out of range", i, e.Sender)
		case e.SerializerId != 0: // the only one protoactor sends at this version
			return fmt.Errorf("envelope %d: serializer %d not accepted", i, e.SerializerId)
		}
	}
	return nil
}

func peerOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return "unknown"
}

// clientStream presents the token on every stream protoactor opens, and
// tracks its connection.
func (g *guard) clientStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if !g.keep(cc) {
		return nil, status.Error(codes.Unavailable, errGuardClosed.Error())
	}
	return streamer(metadata.AppendToOutgoingContext(ctx, authKey, string(g.token)), desc, cc, method, opts...)
}

// clientUnary presents the token on every call.
func (g *guard) clientUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !g.keep(cc) {
		return status.Error(codes.Unavailable, errGuardClosed.Error())
	}
	return invoker(metadata.AppendToOutgoingContext(ctx, authKey, string(g.token)), method, req, reply, cc, opts...)
}

// dial connects protoactor's clients, until close.
func (g *guard) dial(ctx context.Context, addr string) (net.Conn, error) {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return nil, errGuardClosed
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// keep tracks cc (forgetting the ones shut down), false once closed.
func (g *guard) keep(cc *grpc.ClientConn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	for c := range g.conns {
		if c.GetState() == connectivity.Shutdown {
			delete(g.conns, c)
		}
	}
	g.conns[cc] = struct{}{}
	return true
}

func (g *guard) enter() {
	g.mu.Lock()
	if g.handlers == 0 {
		g.idle = make(chan struct{})
	}
	g.handlers++
	g.mu.Unlock()
}

func (g *guard) leave() {
	g.mu.Lock()
	g.handlers--
	if g.handlers == 0 {
		close(g.idle)
	}
	g.mu.Unlock()
}

// close refuses every later dial and stream.
func (g *guard) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// connWait is how long drain lets protoactor close its own connections.
const connWait = 100 * time.Millisecond

// drain waits, bounded by ctx, for the server handlers to return and the
// client connections to shut down, then closes the connections left. It
// fails when handlers are still running at the bound.
func (g *guard) drain(ctx context.Context) error {
	g.mu.Lock()
	idle := g.idle
	conns := make([]*grpc.ClientConn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.conns = map[*grpc.ClientConn]struct{}{}
	g.mu.Unlock()
	// protoactor closes its connections as its writers stop; give it a
	// moment (not the whole bound: a connection to a peer that is gone
	// never gets there), then close what is left.
	cctx, cancel := context.WithTimeout(ctx, connWait)
	defer cancel()
	for _, c := range conns {
		for s := c.GetState(); s != connectivity.Shutdown && c.WaitForStateChange(cctx, s); s = c.GetState() {
		}
		_ = c.Close()
	}
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
		}
	}
	g.mu.Lock()
	n := g.handlers
	g.mu.Unlock()
	if n > 0 { // a handler that entered after the wait began counts too
		return fmt.Errorf("%d stream handlers still running: %w", n, errs.ErrTimeout)
	}
	return nil
}
