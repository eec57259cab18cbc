package remoting

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/keepalive"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/internal/errs"
)

// ErrBadArgument: a call had an invalid argument (a bad Config, a
// second Start).
var ErrBadArgument = errs.ErrBadArgument

// ErrClosed: the runtime is closed or closing (Start), or remoting is
// closed.
var ErrClosed = errs.ErrClosed

// Defaults and fixed settings of remoting.
const (
	defaultMaxMessage = 16 << 20
	defaultBatchSize  = 64
	// DefaultPeerTimeout is Config.PeerTimeout's default: how long a
	// peer may be silent before its connections are dropped.
	DefaultPeerTimeout = 10 * time.Second
	// serverMinPing is the shortest interval at which the server pings an
	// idle client.
	serverMinPing = time.Second
	// minSecret is the shortest shared secret accepted (128 bits).
	minSecret = 16
	// clientMinKeepalive is the shortest client ping interval grpc-go
	// accepts; it raises shorter ones to this.
	clientMinKeepalive = 10 * time.Second
	// connectAttempts is protoactor's MaxRetryCount: its endpoint writer
	// sleeps 2 s after every failed connect, the last one too, and leaks
	// the connection of every attempt but the last, so one attempt reports
	// an unreachable peer in 2 s and leaks nothing.
	connectAttempts = 1
	// writerQueue is the initial size of each peer's send queue; protoactor
	// allocates it up front (1,000,000 slots by default) and grows it.
	writerQueue = 1024
	// handshakeTimeout bounds a control connection's handshake on the
	// server (from its accept to HTTP/2's preface): what a stranger that
	// stays silent holds, at most, of one of the gate's slots.
	handshakeTimeout = 2 * time.Second
	// grpcMinConnect is grpc-go's default bound on a connection attempt.
	grpcMinConnect = 20 * time.Second
	// closeWait bounds how long Close waits for the streams and connections
	// to end on their own before it cuts them.
	closeWait = 2 * time.Second
)

// Config configures a runtime's protoactor remoting, the control plane.
//
// The zero values of MaxMessage, BatchSize and PeerTimeout take the
// defaults.
// Addr's host must name an interface peers can reach when Advertise is
// empty: a wildcard host ("", "0.0.0.0", "::") needs Advertise.
type Config struct {
	Addr       string // listen "host:port"; port 0 picks a free one
	Advertise  string // optional "host:port" peers use to reach this runtime; default: Addr's host with the bound port (port 0 here also means the bound port)
	Secret     []byte // at least 16 bytes, shared by the group; every control connection proves it, both ways, and is keyed from it
	MaxMessage int    // largest gRPC message sent or received, default 16 MiB
	BatchSize  int    // protoactor endpoint-writer batch size, default 64 (so BatchSize x the largest control message stays under MaxMessage)
	// PeerTimeout is how long a connected peer may stay silent (no
	// record, heartbeats included, and no answer to keepalive pings: a
	// paused, swapped or starved process, a host gone without closing)
	// before its connections are dropped and its endpoint reported
	// terminated; it also bounds a handshake with a peer this runtime
	// dials. Default DefaultPeerTimeout. A peer that closes its
	// connections or exits is reported at once, whatever the timeout.
	PeerTimeout time.Duration
}

// Remote is a runtime's protoactor remoting: a gRPC server on the listen
// address, and a connection to each peer it sends to. Every connection,
// either way, starts with a mutual challenge-response on the group's
// secret with fresh nonces, before HTTP/2 (remote_handshake.go), and then
// carries only AES-256-GCM records keyed from that secret and both nonces
// (remote_record.go): nothing that crosses the wire can be replayed, and
// nothing a stranger sends reaches gRPC. A peer's messages may speak only
// for the address its handshake proved (see guard). A Remote
// lives as long as its runtime: the runtime's Close shuts it down,
// bounded, after its other services; a message sent to a peer after that is dropped as a
// dead letter (protoactor's writer tries once more, refused, and sleeps
// 2 s first).
//
// One remoting runtime per process: protoactor's start sets grpc-go's
// process-wide logger, unsynchronised, so a second one in a process races
// with the first one's gRPC goroutines (the race detector reports it). A
// cluster runs one rank per process; in-process ranks need no remoting.
type Remote struct {
	rt    *actors.Runtime
	pr    *remote.Remote
	g     *guard
	creds *controlCreds
	addr  string
	log   *zap.Logger
	track *eventstream.Subscription // keeps connected

	mu        sync.Mutex
	closed    bool
	connected map[string]bool                        // peers this runtime has a live writer to
	subs      map[*eventstream.Subscription]struct{} // OnEndpointTerminated's
}

// Address is the advertised "host:port": the address in every PID of this
// runtime, the one peers dial.
func (r *Remote) Address() string { return r.addr }

// AuthFailures counts the failures this runtime's dials met in a
// connection's handshake since remoting started (a peer that refused this
// runtime's proof of the group's secret, or whose own proof was wrong),
// and returns the latest, which wraps ErrAuth and names the peer's
// address (nil if none). A wrong secret shows here at once, where
// protoactor only reports the endpoint lost; a caller compares the count
// with the one it saw before to tell a new failure from an old one.
func (r *Remote) AuthFailures() (count uint64, last error) { return r.creds.authFailures() }

// OnEndpointTerminated calls f with the peer's address each time protoactor
// publishes an EndpointTerminatedEvent: the connection to that peer broke
// (it closed or died, or it was silent for PeerTimeout), or a connect to it
// failed (refused, or its handshake failed or found it silent for
// PeerTimeout; reported about 2 s later). It may fire more than once for
// one loss. f runs
// on the goroutine that publishes the event (one of protoactor's), so it
// must not block. cancel stops the calls (a call already begun may still
// finish); Close cancels every f before it tears the connections down, so
// the runtime's own shutdown is not reported.
func (r *Remote) OnEndpointTerminated(f func(addr string)) (cancel func()) {
	if f == nil {
		return func() {}
	}
	var off atomic.Bool
	es := r.rt.ActorSystem().EventStream
	sub := es.SubscribeWithPredicate(func(ev any) {
		if !off.Load() {
			f(ev.(*remote.EndpointTerminatedEvent).Address)
		}
	}, isTerminated)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		es.Unsubscribe(sub)
		return func() {}
	}
	r.subs[sub] = struct{}{}
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			off.Store(true)
			r.mu.Lock()
			delete(r.subs, sub)
			r.mu.Unlock()
			es.Unsubscribe(sub)
		})
	}
}

func isTerminated(ev any) bool {
	_, ok := ev.(*remote.EndpointTerminatedEvent)
	return ok
}

// key is remoting's place among a runtime's services. CloseLast: the
// other services may still talk to peers while they close.
var key = &actors.ServiceKey{Name: "remoting", CloseLast: true}

// Of is rt's remoting, nil when it was not started.
func Of(rt *actors.Runtime) *Remote {
	if rt == nil {
		return nil
	}
	r, _ := actors.Lookup[*Remote](rt, key)
	return r
}

// Start starts remoting on rt, which has none: it listens on cfg.Addr and
// sets the actor system's address to the advertised one, and rt closes it
// when it closes, after its other services. Start it right after
// actors.NewRuntime, before spawning actors peers must reach: PIDs made
// earlier keep the local address. A second call, or a bad cfg, fails with
// ErrBadArgument; a closed runtime with ErrClosed; a listen failure with
// the listener's error (and a later Start may try again).
func Start(rt *actors.Runtime, cfg Config) (*Remote, error) {
	if rt == nil {
		return nil, fmt.Errorf("remoting: start: nil runtime: %w", ErrBadArgument)
	}
	started := false
	r, err := actors.Service(rt, key, func(rt *actors.Runtime) (*Remote, error) {
		started = true
		return start(rt, cfg)
	})
	switch {
	case err != nil:
		return nil, err
	case !started && rt.Closed():
		return nil, fmt.Errorf("remoting: start: %w", ErrClosed)
	case !started:
		return nil, fmt.Errorf("remoting: start: already started at %s: %w", r.addr, ErrBadArgument)
	}
	return r, nil
}

// start checks cfg, listens and starts protoactor's remoting.
func start(rt *actors.Runtime, cfg Config) (*Remote, error) {
	cfg, host, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// protoactor's Start panics when it cannot listen: try first, then
	// hand it the bound port (a port taken in between is recovered below).
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("remoting: listen %s: %w", cfg.Addr, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	adv, err := advertise(cfg, host, port)
	if err != nil {
		return nil, err
	}
	if len(adv) > hsMaxAddr { // the handshake carries it in at most 255 bytes
		return nil, fmt.Errorf("remoting: advertised address %q: longer than %d bytes: %w", adv, hsMaxAddr, ErrBadArgument)
	}
	log := rt.Logger().Named("remote")
	g := newGuard(log)
	creds := newControlCreds(cfg.Secret, adv, cfg.PeerTimeout, log)
	pcfg := remote.Configure(host, port,
		remote.WithAdvertisedHost(adv),
		remote.WithServerOptions(serverOptions(cfg, g, creds)...),
		remote.WithDialOptions(dialOptions(cfg, g, creds)...),
		remote.WithEndpointWriterBatchSize(cfg.BatchSize),
		remote.WithEndpointWriterQueueSize(writerQueue),
	)
	pcfg.MaxRetryCount = connectAttempts
	r := &Remote{
		rt: rt, g: g, creds: creds, addr: adv, log: log,
		connected: map[string]bool{},
		subs:      map[*eventstream.Subscription]struct{}{},
	}
	es := rt.ActorSystem().EventStream
	r.track = es.Subscribe(r.keep)
	r.pr = remote.NewRemote(rt.ActorSystem(), pcfg)
	if err := startProto(r.pr); err != nil {
		es.Unsubscribe(r.track)
		g.close()
		return nil, fmt.Errorf("remoting: start on %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	log.Info("remoting started", zap.String("address", adv), zap.Int("max_message", cfg.MaxMessage),
		zap.Int("batch", cfg.BatchSize), zap.Duration("peer_timeout", cfg.PeerTimeout))
	return r, nil
}

// startProto runs protoactor's Start, which panics where it should return
// an error (listen, endpoint manager start).
func startProto(pr *remote.Remote) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	pr.Start()
	return nil
}

// keep follows which peers have a live endpoint writer, so Close can stop
// them.
func (r *Remote) keep(ev any) {
	switch e := ev.(type) {
	case *remote.EndpointConnectedEvent:
		r.mu.Lock()
		if !r.closed {
			r.connected[e.Address] = true
		}
		r.mu.Unlock()
	case *remote.EndpointTerminatedEvent:
		r.mu.Lock()
		delete(r.connected, e.Address)
		r.mu.Unlock()
	}
}

// Close shuts remoting down, bounded by ctx and closeWait: it cancels the
// OnEndpointTerminated callbacks, refuses new connections, stops the gRPC
// server (peers see this runtime's endpoint terminate), stops the endpoint
// writers the way protoactor does when a peer is lost, waits for the
// streams and connections to end, and cuts those left. Not protoactor's
// graceful Shutdown: that one sleeps up to 10 s and races. The runtime
// calls it when it closes, after its other services; a later call does
// nothing, and Start does not start a closed runtime's remoting again.
func (r *Remote) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	subs, addrs := r.subs, r.connected
	r.subs, r.connected = nil, nil
	r.mu.Unlock()
	es := r.rt.ActorSystem().EventStream
	for s := range subs {
		es.Unsubscribe(s)
	}
	r.g.close()
	r.pr.Shutdown(false)
	for a := range addrs {
		es.Publish(&remote.EndpointTerminatedEvent{Address: a})
	}
	es.Unsubscribe(r.track)
	ctx, cancel := context.WithTimeout(ctx, closeWait)
	defer cancel()
	err := r.g.drain(ctx)
	r.log.Debug("remoting closed", zap.String("address", r.addr), zap.Int("peers", len(addrs)), zap.Error(err))
	if err != nil {
		return fmt.Errorf("remoting: close: %w", err)
	}
	return nil
}

// withDefaults fills in the defaults and checks cfg; host is Addr's host.
func (c Config) withDefaults() (Config, string, error) {
	bad := func(format string, a ...any) (Config, string, error) {
		return c, "", fmt.Errorf("remoting: "+format+": %w", append(a, ErrBadArgument)...)
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return bad("Addr %q: %v", c.Addr, err)
	}
	if _, err := parsePort(port); err != nil {
		return bad("Addr %q: %v", c.Addr, err)
	}
	if len(c.Secret) < minSecret {
		return bad("Secret has %d bytes, want at least %d", len(c.Secret), minSecret)
	}
	c.Secret = append([]byte(nil), c.Secret...)
	if c.MaxMessage < 0 || c.BatchSize < 0 || c.PeerTimeout < 0 {
		return bad("negative MaxMessage (%d), BatchSize (%d) or PeerTimeout (%v)", c.MaxMessage, c.BatchSize, c.PeerTimeout)
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = defaultMaxMessage
	}
	if c.BatchSize == 0 {
		c.BatchSize = defaultBatchSize
	}
	if c.PeerTimeout == 0 {
		c.PeerTimeout = DefaultPeerTimeout
	}
	if c.Advertise == "" && isWildcard(host) {
		return bad("Addr %q listens on every interface: set Advertise", c.Addr)
	}
	return c, host, nil
}

// advertise is the address peers dial: cfg.Advertise, or Addr's host, with
// the bound port where the port is 0.
func advertise(c Config, host string, port int) (string, error) {
	if c.Advertise == "" {
		return net.JoinHostPort(host, strconv.Itoa(port)), nil
	}
	h, p, err := net.SplitHostPort(c.Advertise)
	if err == nil && h == "" {
		err = fmt.Errorf("no host")
	}
	var n int
	if err == nil {
		n, err = parsePort(p)
	}
	if err != nil {
		return "", fmt.Errorf("remoting: Advertise %q: %v: %w", c.Advertise, err, ErrBadArgument)
	}
	if n == 0 {
		n = port
	}
	return net.JoinHostPort(h, strconv.Itoa(n)), nil
}

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return 0, fmt.Errorf("bad port %q", p)
	}
	return n, nil
}

func isWildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// pingEvery is how often an idle connection is pinged: a quarter of the
// peer timeout, within grpc-go's bounds for each side.
func pingEvery(c Config, least time.Duration) time.Duration {
	return max(c.PeerTimeout/4, least)
}

// serverOptions: the control credentials (a connection's handshake and
// HTTP/2's preface within handshakeTimeout), message limits, keepalive
// (ping an idle client every quarter of PeerTimeout, drop one that does
// not answer within PeerTimeout; accept client pings as often as clients
// send them), and the guard's interceptors.
func serverOptions(c Config, g *guard, creds *controlCreds) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.Creds(creds),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.MaxRecvMsgSize(c.MaxMessage),
		grpc.MaxSendMsgSize(c.MaxMessage),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: serverMinPing, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: pingEvery(c, serverMinPing), Timeout: c.PeerTimeout}),
		grpc.ChainStreamInterceptor(g.serverStream),
		grpc.ChainUnaryInterceptor(g.serverUnary),
	}
}

// dialOptions replace protoactor's default (insecure transport only): the
// control credentials, a connection attempt bounded by no less than
// PeerTimeout (a peer paused while this runtime dials it is waited for,
// not refused sooner), the limits, keepalive, the guard's interceptors
// and its dialer.
func dialOptions(c Config, g *guard, creds *controlCreds) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: max(grpcMinConnect, c.PeerTimeout+handshakeTimeout)}),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(c.MaxMessage), grpc.MaxCallRecvMsgSize(c.MaxMessage)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: pingEvery(c, clientMinKeepalive), Timeout: c.PeerTimeout, PermitWithoutStream: true}),
		grpc.WithChainStreamInterceptor(g.clientStream),
		grpc.WithChainUnaryInterceptor(g.clientUnary),
		grpc.WithContextDialer(g.dial),
	}
}
