package tcp

import (
	"fmt"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// Transport is one rank's endpoint of a group whose ranks talk over TCP: a
// msg.Endpoint (transport.Transport, transport.TrySender and LosePeer,
// with the message layer's contract) over one link per peer, whose frames
// travel on that peer's ConnsPerPeer connections (see the package doc for
// the wire). Its particulars: a peer that closes a connection is lost at
// once; a Send whose context ends mid-frame returns at once and the
// frame's rest is finished from a copy (at most MaxFrame bytes), so an
// eager message cut short is still delivered and its Send returns nil;
// goroutines run only while operations wait on them or for short
// heartbeats (a Recv may read its message itself), and Close waits for
// all of them.
type Transport struct {
	*msg.Endpoint
	cfg        Config
	rank, size int
	links      []*link // by rank, nil at this rank

	refused atomic.Uint64
}

// Stats counts what a Transport refused or dropped.
type Stats struct {
	// Refused is the number of connections refused during Connect: bad
	// handshakes (strangers, wrong secret, wrong group, garbage, replays)
	// and duplicates.
	Refused uint64
	// ProtocolErrors is the number of peers dropped for breaking the frame
	// protocol (an oversized frame, an unknown type, a window overrun).
	ProtocolErrors uint64
	// PeersLost is the number of peers lost, whatever the reason.
	PeersLost uint64
}

// Stats returns the counters.
func (t *Transport) Stats() Stats {
	s := t.Endpoint.Stats()
	return Stats{Refused: t.refused.Load(), ProtocolErrors: s.ProtocolErrors, PeersLost: s.PeersLost}
}

// newTransport is cfg's rank before Connect: a link per peer, without
// connections yet.
func newTransport(cfg Config) *Transport {
	t := &Transport{cfg: cfg, rank: cfg.Rank, size: cfg.Size, links: make([]*link, cfg.Size)}
	for _, r := range cfg.Peers {
		t.links[r] = newLink(&t.cfg, r)
	}
	return t
}

// msgLinks are the links, by rank.
func (t *Transport) msgLinks() []msg.Link {
	links := make([]msg.Link, t.size)
	for r, l := range t.links {
		if l != nil {
			links[r] = l
		}
	}
	return links
}

// start builds the Endpoint over the links once every connection is up.
func (t *Transport) start() error {
	links := t.msgLinks()
	ep, err := msg.New(msg.Config{Rank: t.rank, Size: t.size, Name: "tcp", MaxBuffered: t.cfg.MaxBuffered,
		PeerTimeout: t.cfg.PeerTimeout, HeartbeatInterval: t.cfg.HeartbeatInterval, Poll: pollBudget(t.cfg)}, links)
	if err != nil {
		return fmt.Errorf("tcp: rank %d: %w", t.rank, err)
	}
	t.Endpoint = ep
	return nil
}

// closeLinks closes the connections of a Transport that never started.
func (t *Transport) closeLinks() {
	for _, l := range t.links {
		if l != nil {
			l.Close()
		}
	}
}
