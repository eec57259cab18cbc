package shm

import (
	"context"
	"fmt"
	"net"

	"github.com/choreo-gpu/choreo/collectives/transport/mesh"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// ConnectLinks binds this rank's rendezvous socket (an abstract name of
// Run, Group and Rank), joins the group's shm mesh there (see the package
// doc and handshake.go) and returns the links to cfg.Peers by rank (nil
// elsewhere) once every pair is connected and mapped, for a msg.Endpoint
// whose MaxBuffered is at least cfg.MaxBuffered. The socket closes when
// ConnectLinks returns. ctx bounds the whole; on failure everything is
// closed and unmapped and the error names the peers still missing.
func ConnectLinks(ctx context.Context, cfg Config) ([]msg.Link, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if err := supported(); err != nil {
		return nil, err
	}
	links := make([]msg.Link, cfg.Size)
	if len(cfg.Peers) == 0 {
		return links, nil
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
		HandshakeTimeout: cfg.HandshakeTimeout, Hello: cfg.hello().encode(), CheckHello: cfg.checkHello,
		Setup: cfg.setupRegion, OnRefused: cfg.OnRefused,
	})
	if err != nil {
		return nil, err // "shm mesh: rank R: connect: ..."
	}
	for i, p := range cfg.Peers {
		l, err := newLink(&cfg, m.Links[p][0])
		if err != nil {
			for _, q := range cfg.Peers[i:] {
				_ = m.Links[q][0].Close()
			}
			for _, l := range links {
				if l != nil {
					l.Close()
				}
			}
			return nil, fmt.Errorf("shm: rank %d: peer %d: %w", cfg.Rank, p, err)
		}
		links[p] = l
	}
	return links, nil
}
