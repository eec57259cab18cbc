package shm

import (
	"context"
	"fmt"
	"net"

	"github.com/choreo-gpu/choreo/collectives/transport/mesh"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// Connect builds this rank's part of the full mesh and returns its
// endpoint once every pair is connected: it binds its rendezvous socket
// (an abstract name of Run, Group and Rank) and joins package mesh's full
// mesh there, each higher rank dialing the lower (label "shm"; see
// handshake.go for what the ranks announce), and maps each pair's region:
// the lower rank creates it after the higher proved the secret and hands
// it over the socket. Connections that fail the handshake are refused,
// counted (Stats.Refused) and passed to Config.OnRefused, and change
// nothing; what a stranger may cost is package mesh's bound. The
// rendezvous socket closes when Connect returns. ctx bounds the whole; on
// failure everything is closed and unmapped and the error names the peers
// still missing. Connect links this rank to every other one (Config.Peers
// must be nil or list them all); ConnectLinks links it to some.
func Connect(ctx context.Context, cfg Config) (*Transport, error) {
	t, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := t.start(); err != nil {
		return nil, err
	}
	return t, nil
}

// ConnectLinks links this rank to Config.Peers as Connect does, and
// returns the links, indexed by rank (nil at this rank and at the ranks
// not in Peers), for a msg.Endpoint that may hold other carriers' links
// too. Refused connections are reported to OnRefused only.
func ConnectLinks(ctx context.Context, cfg Config) ([]msg.Link, error) {
	t, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return t.ends, nil
}

func connect(ctx context.Context, cfg Config) (*Transport, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if err := supported(); err != nil {
		return nil, err
	}
	t := newTransport(cfg)
	if len(cfg.Peers) == 0 {
		return t, nil
	}
	var ln net.Listener
	if cfg.Peers[len(cfg.Peers)-1] > cfg.Rank { // a higher peer dials this rank
		name := sockName(cfg.Run, cfg.Group, cfg.Rank)
		if ln, err = net.Listen(network, name); err != nil {
			return nil, fmt.Errorf("shm: rank %d: listen on %q (a live process of this run and group holds the name?): %w",
				cfg.Rank, name, err)
		}
	}
	m, err := mesh.Connect(ctx, mesh.Config{
		Rank: cfg.Rank, Size: cfg.Size, Group: cfg.Group, Secret: cfg.Secret, Label: "shm",
		Peers: cfg.Peers, Order: mesh.HigherDials, Listener: ln,
		Dial: func(ctx context.Context, p int) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, sockName(cfg.Run, cfg.Group, p))
		},
		HandshakeTimeout: cfg.HandshakeTimeout, Hello: t.hello().encode(), CheckHello: t.checkHello,
		Setup: t.setupRegion, OnRefused: cfg.OnRefused,
	})
	if err != nil {
		return nil, err // "shm mesh: rank R: connect: ..."
	}
	t.refused.Store(m.Refused)
	for i, p := range cfg.Peers {
		if err := t.attach(m.Links[p][0]); err != nil {
			for _, q := range cfg.Peers[i:] {
				_ = m.Links[q][0].Close()
			}
			t.closeLinks()
			return nil, fmt.Errorf("shm: rank %d: peer %d: %w", cfg.Rank, p, err)
		}
	}
	return t, nil
}

// attach installs an authenticated link's socket and region in its peer's
// link. Single copy from the peer needs its process, as the kernel names
// it, and this process's leave to read its memory.
func (t *Transport) attach(ml mesh.Link) error {
	nc := ml.Conn.(*net.UnixConn)
	r := ml.Extra.(*region)
	s, err := newSock(t.links[ml.Peer], nc)
	if err != nil {
		return err
	}
	h, _ := decodeHello(ml.Hello) // checked by checkHello
	pid := 0
	if c := t.cfg; c.CMAMin > 0 && h.probe != 0 && (!c.cmaAuto || cmaPays(c.Size)) {
		if id, err := peerPID(nc); err == nil && probeCMA(id, h.probe) {
			pid = id
		}
	}
	t.links[ml.Peer].attach(s, r.mem, r.g, int(h.window))
	t.links[ml.Peer].cmaPID = pid
	return nil
}
