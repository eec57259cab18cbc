package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/actors/remoting"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/internal/errs"
	"github.com/choreo-gpu/choreo/launch"
	// The carriers a group links its pairs by: shared memory inside a
	// host, TCP between hosts. Each registers itself with msg.
	_ "github.com/choreo-gpu/choreo/collectives/transport/shm"
	_ "github.com/choreo-gpu/choreo/collectives/transport/tcp"
)

// lossGrace is how long a peer the control plane reports gone has to let
// its data connection deliver what it sent before the data plane is told:
// a dead process's connections end by themselves within it on one host,
// and a silent host's within the data plane's peer timeout.
const lossGrace = 100 * time.Millisecond

// mismatchWait bounds how long rank 0, having found the ranks' transports
// differ, waits for the other ranks to leave (each finds the same in the
// roster) before it closes its control plane: the roster it sent must
// reach them first.
const mismatchWait = 3 * time.Second

// Join makes this process's rank of a group whose ranks live in separate
// processes (on one host or several): it starts rt's control plane
// (protoactor remoting, authenticated with cfg.Secret) unless rt already
// has one, meets the other ranks at the rendezvous rank 0 hosts (see
// JoinConfig), links the data plane to every peer (shared memory to the
// ranks of its host, TCP to the others: JoinConfig.Transport), and returns
// the Group. Every rank calls Join with the same Size, Secret and
// Run.
//
// The whole is bounded by ctx and cfg.Timeout; a rendezvous that does not
// complete fails with ErrTimeout naming the ranks missing, and a rank that
// disagrees with rank 0 (world size, run, protocol version, a rank taken
// twice during the rendezvous) with ErrMismatch; a process that asks for a
// rank of a group formed already waits to take it when the members grow
// the group back (collectives.Group.Grow: the rank was lost and the group
// lacks it), and fails with ErrTimeout saying so when they do not. Some
// failures come at once instead: a rank
// whose secret differs from rank 0's fails within a second, its error
// wrapping ErrAuth ("authentication failed"); ranks that
// name different transports all fail with ErrMismatch naming each rank's,
// and a transport named that cannot link some pair (shm across hosts)
// with ErrBadArgument naming the pair, as soon as the roster arrives; a rank that dies after its hello and before the roster
// is dropped from the rendezvous when its control connection ends (a new
// process may take its rank), and one lost after the roster and before the
// data plane is connected fails the others with ErrPeerLost naming it.
//
// The peer timeout (cfg.PeerTimeout, else DefaultPeerTimeout) is how long a peer may stay silent (a paused,
// swapped or starved process, a host gone without closing) before it is
// lost, on the control plane and the data plane alike; a peer whose
// connection closes or whose process exits is lost at once, whatever it
// is. (When rt's remoting was started before Join, its own
// remoting.Config.PeerTimeout governs the control plane.) Afterwards a peer
// that dies, closes its group or stays silent past the peer timeout fails
// every pending and later operation involving it with ErrPeerLost, on
// every survivor: a dead process within milliseconds on one host (the data
// plane sees its connections end, the control plane its endpoint). After
// any failure, Join and the group's operations return within the peer
// timeout and a few seconds. opts configure the group as they do
// collectives.New's. Close leaves the group; rt stays usable, also for a
// later Join.
func Join(ctx context.Context, rt *actors.Runtime, cfg JoinConfig, opts ...collectives.Option) (*collectives.Group, error) {
	if err := cfg.check(rt); err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultJoinTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	where := fmt.Sprintf("cluster: join rank %d of %d", cfg.Rank, cfg.Size)
	peerTimeout := cfg.peerTimeout()
	control, err := cfg.startControl(ctx, rt, peerTimeout)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	host, _, _ := net.SplitHostPort(control)
	carriers, err := prepareCarriers(host, cfg.asked())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	node, err := Start(rt, Spec{Rank: cfg.Rank, Size: cfg.Size, Run: cfg.Run,
		Coordinator: cfg.coordinator(), Data: carriers.addr(), Transport: cfg.asked(), Host: cfg.HostID, PeerTimeout: peerTimeout})
	if err != nil {
		carriers.close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	roster, err := node.Rendezvous(ctx)
	if err != nil {
		carriers.close()
		node.Close("rendezvous failed")
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	rj := &rejoiner{rt: rt, node: node, cfg: cfg, pt: peerTimeout, opts: opts}
	leave := func() {
		rj.close()
		node.Close("closed")
	}
	g, err := cfg.form(ctx, rt, node, carriers, roster, peerTimeout, leave, rj, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	// Under an elastic launch, the launcher now counts this rank as one
	// whose loss the group survives (a no-op elsewhere); if it cannot be
	// told, the rank's end keeps ending the launch, which is safe.
	if err := launch.Joined(); err != nil {
		rt.Logger().Warn("could not tell the launcher that this rank joined; its loss will end the launch", zap.Error(err))
	}
	return g, nil
}

// form links this rank's data plane to every rank of roster through
// carriers and makes the group, with rj to grow it back: what Join does
// after the rendezvous (leave: the rank's Node closes with the group), and
// a rejoiner once rank 0 answered with a grown group's roster (leave nil:
// Grow hands the old group's to the new one). A peer lost before the data
// plane is connected fails it, naming the peer. On failure the carriers
// are closed, and Join's Node (leave set) too.
func (c JoinConfig) form(ctx context.Context, rt *actors.Runtime, node *Node, carriers *readied, roster Roster,
	pt time.Duration, leave func(), rj *rejoiner, opts []collectives.Option) (*collectives.Group, error) {
	fail := func(reason string, err error) (*collectives.Group, error) {
		if leave != nil {
			node.Close(reason)
		}
		return nil, fmt.Errorf("%s: %w", roster, err)
	}
	// Watch from the roster on: a peer lost before the data plane is
	// connected cancels the connect, naming it.
	cctx, cancelConnect := context.WithCancelCause(ctx)
	defer cancelConnect(nil)
	peers := &peerWatch{cancel: cancelConnect, lost: make(chan struct{}, c.Size)}
	node.Watch(roster, peers.report)
	plan, err := planLinks(roster, c.Rank)
	if err != nil {
		carriers.close()
		if c.Rank == 0 && leave != nil { // the others fail on the same roster: let it reach them
			peers.awaitLost(c.Size-1, mismatchWait)
		}
		return fail("transport mismatch", err)
	}
	t, err := c.connectDataPlane(cctx, carriers, roster, plan, pt, rt.Logger())
	node.StopProbes()
	if err == nil {
		err = peers.attach(t)
	} else if lost := peers.firstLoss(); lost != nil {
		err = lost
	}
	if err != nil {
		return fail("data plane failed", err)
	}
	hosts := make([]string, len(roster.Members))
	for i, m := range roster.Members {
		hosts[i] = m.Host
	}
	// The roster's hosts first, so that a caller's own WithHosts wins.
	opts = append([]collectives.Option{collectives.WithHosts(hosts)}, opts...)
	opts = append(opts, collectives.WithEpoch(roster.Epoch), collectives.WithRejoiner(rj))
	g, err := collectives.NewJoined(ctx, rt, t, roster.Group, leave, opts...)
	if err != nil {
		return nil, err
	}
	rt.Logger().Info("joined", zap.Int("rank", c.Rank), zap.Int("size", c.Size), zap.String("source", c.Source),
		zap.String("transport", plan.kinds), zap.Stringer("links", plan), zap.Duration("peer_timeout", pt),
		zap.String("run", c.Run), zap.Uint64("group", roster.Group), zap.Uint64("epoch", roster.Epoch),
		zap.Strings("data", roster.DataAddrs()))
	return g, nil
}

// peerWatch routes the losses a Node reports for one Join: before the data
// plane exists it keeps them and cancels the data plane's connect (the
// first names the rank); once attached, it tells the data plane, after
// lossGrace (the data connection may still deliver what the peer sent
// before it went; its end shows there too, at once when its process died).
type peerWatch struct {
	cancel context.CancelCauseFunc
	lost   chan struct{} // one token per loss (buffered for every peer)

	mu    sync.Mutex
	first error
	t     dataPlane
}

// report is the Node's onLost: it runs on the Node's goroutine and does
// not block.
func (w *peerWatch) report(rank int, cause error) {
	select {
	case w.lost <- struct{}{}:
	default:
	}
	w.mu.Lock()
	t := w.t
	if t == nil && w.first == nil {
		w.first = fmt.Errorf("rank %d lost before the data plane was connected: %v: %w", rank, cause, errs.ErrPeerLost)
		w.cancel(w.first)
	}
	w.mu.Unlock()
	if t != nil {
		time.AfterFunc(lossGrace, func() { t.LosePeer(rank, cause) })
	}
}

// attach hands later losses to t, or fails (closing t) when a peer was
// lost before it was connected.
func (w *peerWatch) attach(t dataPlane) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first != nil {
		_ = t.Close()
		return w.first
	}
	w.t = t
	return nil
}

// firstLoss is the loss that cancelled the connect, nil if none.
func (w *peerWatch) firstLoss() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

// awaitLost waits until n peers are lost, at most for d.
func (w *peerWatch) awaitLost(n int, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for range n {
		select {
		case <-w.lost:
		case <-t.C:
			return
		}
	}
}

// asked is the transport this rank asks for: "auto" when none is set.
func (c JoinConfig) asked() string {
	if c.Transport == "" {
		return "auto"
	}
	return c.Transport
}

// peerTimeout is the group's peer timeout: c.PeerTimeout, else
// DefaultPeerTimeout.
func (c JoinConfig) peerTimeout() time.Duration {
	if c.PeerTimeout > 0 {
		return c.PeerTimeout
	}
	return DefaultPeerTimeout
}

// check validates c for Join.
func (c JoinConfig) check(rt *actors.Runtime) error {
	if c.Err != nil {
		return c.Err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("cluster: join: %w: %s", errs.ErrBadArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case rt == nil:
		return bad("nil runtime")
	case c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size:
		return bad("rank %d of world size %d", c.Rank, c.Size)
	case c.PeerTimeout < 0:
		return bad("peer timeout %v", c.PeerTimeout)
	case c.Transport != "" && c.Transport != msg.Auto && !registered(c.Transport):
		return bad("transport %q (want auto or one of %v)", c.Transport, msg.Names())
	case len(c.Secret) < msg.MinSecret:
		return bad("secret of %d bytes, want at least %d", len(c.Secret), msg.MinSecret)
	case len(c.Hosts) == 0 && c.Coordinator == "":
		return bad("neither Hosts nor Coordinator is set")
	case len(c.Hosts) != 0 && len(c.Hosts) != c.Size:
		return bad("%d hosts for world size %d", len(c.Hosts), c.Size)
	}
	return nil
}

// coordinator is rank 0's control address.
func (c JoinConfig) coordinator() string {
	if len(c.Hosts) > 0 {
		return c.Hosts[0]
	}
	return c.Coordinator
}

// startControl starts rt's remoting at this rank's control address with
// the peer timeout pt (or checks the one running) and returns the address
// peers reach it at.
func (c JoinConfig) startControl(ctx context.Context, rt *actors.Runtime, pt time.Duration) (string, error) {
	addr, err := c.controlAddr(ctx)
	if err != nil {
		return "", err
	}
	if r := remoting.Of(rt); r != nil {
		if _, port, _ := net.SplitHostPort(addr); port != "0" && r.Address() != addr {
			return "", fmt.Errorf("%w: the runtime's remoting listens at %s, the configuration gives this rank %s",
				errs.ErrBadArgument, r.Address(), addr)
		}
		return r.Address(), nil
	}
	r, err := remoting.Start(rt, c.remoteConfig(addr, pt))
	if err != nil {
		return "", fmt.Errorf("control plane: %w", err)
	}
	return r.Address(), nil
}

// remoteConfig is the control plane's configuration at addr with the
// peer timeout pt.
func (c JoinConfig) remoteConfig(addr string, pt time.Duration) remoting.Config {
	return remoting.Config{Addr: addr, Secret: c.Secret, PeerTimeout: pt}
}

// controlAddr is where this rank's control plane listens: its hostfile
// entry, the coordinator's address on rank 0, or a free port on the
// address that reaches the coordinator.
func (c JoinConfig) controlAddr(ctx context.Context) (string, error) {
	switch {
	case len(c.Hosts) > 0:
		return c.Hosts[c.Rank], nil
	case c.Rank == 0:
		return c.Coordinator, nil
	}
	var d net.Dialer
	u, err := d.DialContext(ctx, "udp", c.Coordinator) // sends nothing: picks the route
	if err != nil {
		return "", fmt.Errorf("route to the coordinator %s: %w", c.Coordinator, err)
	}
	defer func() { _ = u.Close() }()
	ip, _, err := net.SplitHostPort(u.LocalAddr().String())
	if err != nil {
		return "", errors.Join(fmt.Errorf("local address toward %s", c.Coordinator), err)
	}
	return net.JoinHostPort(ip, "0"), nil
}

// registered reports whether a carrier called name is registered.
func registered(name string) bool {
	_, ok := msg.Lookup(name)
	return ok
}
