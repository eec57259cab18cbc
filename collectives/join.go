package collectives

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/collectives/cluster"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/shm"
	"github.com/choreo-gpu/choreo/collectives/transport/tcp"
)

// lossGrace is how long a peer the control plane reports gone has to let
// its data connection deliver what it sent before the data plane is told:
// a dead process's connections end by themselves within it on one host,
// and a silent host's within the data plane's heartbeat timeout.
const lossGrace = 100 * time.Millisecond

// Join makes this process's rank of a group whose ranks live in separate
// processes (on one host or several): it starts rt's control plane
// (protoactor remoting, authenticated with cfg.Secret) unless rt already
// has one, meets the other ranks at the rendezvous rank 0 hosts (see
// JoinConfig), connects the data plane to every peer (shared memory when
// every rank is on this host, TCP otherwise: JoinConfig.Transport), and
// returns the Group. Every rank calls Join with the same Size, Secret and
// Run.
//
// The whole is bounded by ctx and cfg.Timeout; a rendezvous that does not
// complete fails with ErrTimeout naming the ranks missing, and a rank that
// disagrees with rank 0 (world size, run, protocol version, a rank taken
// twice) with ErrMismatch. Afterwards a peer whose process dies, closes its
// group or goes silent fails every pending and later operation involving
// it with ErrPeerLost, on every survivor: a dead process within
// milliseconds on one host (the data plane sees its connections end, the
// control plane its endpoint), a silent one within the data plane's peer
// timeout (10 s). Close leaves the group; rt stays usable, also for a
// later Join.
func Join(ctx context.Context, rt *actors.Runtime, cfg JoinConfig, opts ...Option) (*Group, error) {
	if err := cfg.check(rt); err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultJoinTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	where := fmt.Sprintf("collectives: join rank %d of %d", cfg.Rank, cfg.Size)
	control, err := cfg.startControl(ctx, rt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	host, _, _ := net.SplitHostPort(control)
	ln, err := tcp.Listen(net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("%s: data plane: %w", where, err)
	}
	node, err := cluster.Start(rt, cluster.Spec{Rank: cfg.Rank, Size: cfg.Size, Run: cfg.Run,
		Coordinator: cfg.coordinator(), Data: ln.Addr()})
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	roster, err := node.Rendezvous(ctx)
	if err != nil {
		_ = ln.Close()
		node.Close("rendezvous failed")
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	t, kind, err := cfg.connect(ctx, ln, roster)
	if err != nil {
		node.Close("data plane failed")
		return nil, fmt.Errorf("%s: %s: %w", where, roster, err)
	}
	node.Watch(roster, func(rank int, cause error) {
		// Let the data connection deliver what the peer sent before it
		// went (its end shows there too, at once when its process died).
		time.AfterFunc(lossGrace, func() { t.LosePeer(rank, cause) })
	})
	opts = append(opts[:len(opts):len(opts)], func(c *config) { c.processes = true })
	g, err := New(rt, t, roster.Group, opts...)
	if err != nil {
		_ = t.Close()
		node.Close("group failed")
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	g.onClose = func() { node.Close("closed") }
	if err := g.agreeOnDevice(ctx); err != nil {
		_ = g.Close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	rt.Logger().Info("joined", zap.Int("rank", cfg.Rank), zap.Int("size", cfg.Size), zap.String("source", cfg.Source),
		zap.String("transport", kind),
		zap.String("run", cfg.Run), zap.Uint64("group", roster.Group), zap.Strings("data", roster.DataAddrs()))
	return g, nil
}

// dataPlane is a transport a peer can be declared lost on.
type dataPlane interface {
	transport.Transport
	LosePeer(rank int, cause error)
}

// connect builds the data plane the roster calls for: shared memory when
// every rank is on this host (or c.Transport says "shm"), TCP otherwise
// (or when c.Transport says "tcp"). It closes ln when it is not used.
func (c JoinConfig) connect(ctx context.Context, ln *tcp.Listener, roster cluster.Roster) (dataPlane, string, error) {
	kind := c.Transport
	if kind == "" || kind == "auto" {
		kind = "tcp"
		if roster.OneHost() && shm.Supported() {
			kind = "shm"
		}
	}
	switch kind {
	case "shm":
		_ = ln.Close()
		t, err := shm.Connect(ctx, shm.Config{Rank: c.Rank, Size: c.Size, Group: roster.Group,
			Run: fmt.Sprintf("%s-%x", c.Run, roster.Group), Secret: c.Secret})
		return t, kind, err
	case "tcp":
		t, err := ln.Connect(ctx, tcp.Config{Rank: c.Rank, Size: c.Size, Group: roster.Group,
			Addrs: roster.DataAddrs(), Secret: c.Secret})
		return t, kind, err
	}
	_ = ln.Close()
	return nil, kind, fmt.Errorf("%w: transport %q (want auto, tcp or shm)", ErrBadArgument, kind)
}

// check validates c for Join.
func (c JoinConfig) check(rt *actors.Runtime) error {
	if c.Err != nil {
		return c.Err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("collectives: join: %w: %s", ErrBadArgument, fmt.Sprintf(format, a...))
	}
	switch {
	case rt == nil:
		return bad("nil runtime")
	case c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size:
		return bad("rank %d of world size %d", c.Rank, c.Size)
	case len(c.Secret) < tcp.MinSecret:
		return bad("secret of %d bytes, want at least %d", len(c.Secret), tcp.MinSecret)
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

// startControl starts rt's remoting at this rank's control address (or
// checks the one running) and returns the address peers reach it at.
func (c JoinConfig) startControl(ctx context.Context, rt *actors.Runtime) (string, error) {
	addr, err := c.controlAddr(ctx)
	if err != nil {
		return "", err
	}
	if r := rt.Remote(); r != nil {
		if _, port, _ := net.SplitHostPort(addr); port != "0" && r.Address() != addr {
			return "", fmt.Errorf("%w: the runtime's remoting listens at %s, the configuration gives this rank %s",
				ErrBadArgument, r.Address(), addr)
		}
		return r.Address(), nil
	}
	r, err := rt.StartRemote(actors.RemoteConfig{Addr: addr, Secret: c.Secret})
	if err != nil {
		return "", fmt.Errorf("control plane: %w", err)
	}
	return r.Address(), nil
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
