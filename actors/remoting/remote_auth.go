package remoting

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/choreo-gpu/choreo/internal/errs"
)

// guard sits in front of protoactor's gRPC server and client, behind the
// connection's authentication (controlCreds: a stranger never gets as far
// as HTTP/2):
//   - every stream's messages are checked before protoactor decodes them
//     (checkMessage): what protoactor's reader would panic on (a type
//     name this binary has not linked, a serializer other than protobuf,
//     an index out of range) and what speaks for another node than the
//     one the connection's handshake proved (a sender, a Terminated, a
//     Watch or Unwatch naming another address; any other actor system
//     message, PoisonPill included) refuse the stream with
//     InvalidArgument, logged at Warn;
//   - unary calls are refused with Unimplemented (protoactor makes none,
//     and its handlers for them panic at this version);
//   - a stream handler that panics anyway is recovered into Internal,
//     logged at Warn;
//
// and the process goes on.
//
// The guard also tracks what Close must end: the server handlers running,
// and the client connections protoactor dialed (it leaks some); after
// close, it dials nothing more.
type guard struct {
	log *zap.Logger

	mu       sync.Mutex
	closed   bool
	handlers int
	idle     chan struct{} // closed while handlers == 0
	conns    map[*grpc.ClientConn]struct{}
}

func newGuard(log *zap.Logger) *guard {
	idle := make(chan struct{})
	close(idle)
	return &guard{log: log, idle: idle, conns: map[*grpc.ClientConn]struct{}{}}
}

// errGuardClosed refuses dials and streams once remoting is closing.
var errGuardClosed = fmt.Errorf("remoting: %w", ErrClosed)

// serverStream checks and recovers a stream (Remoting.Receive).
func (g *guard) serverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	from, ok := provenAddr(ss.Context())
	if !ok { // not a connection controlCreds authenticated: cannot happen with the server's options
		g.log.Warn("remote: refused a stream without a proven address", zap.String("peer", peerOf(ss.Context())), zap.String("method", info.FullMethod))
		return status.Error(codes.Unauthenticated, "choreo: unauthenticated connection")
	}
	g.enter()
	defer g.leave()
	defer g.recoverInto(&err, ss.Context(), info.FullMethod)
	return handler(srv, &checkedStream{ServerStream: ss, g: g, from: from})
}

// serverUnary refuses every call.
func (g *guard) serverUnary(ctx context.Context, _ any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
	g.log.Warn("remote: refused a unary call", zap.String("peer", peerOf(ctx)), zap.String("method", info.FullMethod))
	return nil, status.Error(codes.Unimplemented, "choreo: not served")
}

// provenAddr is the address the connection of ctx proved in its handshake.
func provenAddr(ctx context.Context) (string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", false
	}
	pi, ok := p.AuthInfo.(peerInfo)
	return pi.Addr, ok && pi.Addr != ""
}

// recoverInto turns a handler's panic into a logged Internal refusal.
func (g *guard) recoverInto(err *error, ctx context.Context, method string) {
	if p := recover(); p != nil {
		g.log.Warn("remote: refused a request whose handler panicked", zap.String("peer", peerOf(ctx)), zap.String("method", method), zap.Any("panic", p))
		*err = status.Error(codes.Internal, "choreo: request refused")
	}
}

// checkedStream checks each message protoactor reads before it sees it,
// against from, the connection's proven address.
type checkedStream struct {
	grpc.ServerStream
	g    *guard
	from string
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, ok := m.(*remote.RemoteMessage)
	if !ok {
		return nil
	}
	if err := checkMessage(rm, s.from); err != nil {
		s.g.log.Warn("remote: refused a message", zap.String("peer", peerOf(s.Context())), zap.String("from", s.from), zap.Error(err))
		return status.Error(codes.InvalidArgument, "choreo: "+err.Error())
	}
	return nil
}

func peerOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return "unknown"
}

// clientStream tracks the connection of every stream protoactor opens.
func (g *guard) clientStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if !g.keep(cc) {
		return nil, status.Error(codes.Unavailable, errGuardClosed.Error())
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// clientUnary tracks the connection of every call.
func (g *guard) clientUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !g.keep(cc) {
		return status.Error(codes.Unavailable, errGuardClosed.Error())
	}
	return invoker(ctx, method, req, reply, cc, opts...)
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
