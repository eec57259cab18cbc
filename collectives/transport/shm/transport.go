package shm

import (
	"sync/atomic"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// Transport is one rank's endpoint of a group whose ranks are processes of
// one host, joined pairwise by shared memory (see the package doc): a
// msg.Endpoint over one link per peer. It implements transport.Transport,
// transport.TrySender and LosePeer, not transport.PeerAccess.
//
// Contract: that of msg.Endpoint, with these particulars. A message of at
// most EagerMax bytes (and one slot) is sent at once when the receiver's
// window (its MaxBuffered) has room, and Send returns nil once it is in
// the ring; a larger one, or one that does not fit, waits for the
// receiver's Recv (rendezvous) and is then copied from the caller's slice
// into slots and from the slots into the receiver's buffer, or read once
// from the caller's slice (Config.CMAMin). A peer whose process ends is
// lost at once (its socket closes), after what it had published is
// drained. Per peer a pump goroutine drains the incoming ring and reads
// the socket while calls wait and for a few milliseconds after; an idle
// transport has none but the Endpoint's heartbeat, which pumps each peer
// briefly. Close waits for them and unmaps every region.
type Transport struct {
	*msg.Endpoint // nil until Connect returns

	cfg   Config
	rank  int
	size  int
	links []*link    // nil at rank and at ranks not in Peers
	ends  []msg.Link // the same, as the Endpoint takes them

	refused atomic.Uint64
}

var _ transport.Transport = (*Transport)(nil)

// Stats counts what a Transport refused or dropped.
type Stats struct {
	// Refused is the number of connections refused during Connect: bad
	// handshakes (strangers, wrong secret, wrong group or run, garbage)
	// and duplicates.
	Refused uint64
	// ProtocolErrors is the number of peers dropped for breaking the
	// protocol (a malformed slot or frame, a window overrun).
	ProtocolErrors uint64
	// PeersLost is the number of peers lost, whatever the reason.
	PeersLost uint64
	// SingleCopies is the number of messages received by reading the
	// sender's memory (see Config.CMAMin).
	SingleCopies uint64
}

// Stats returns the counters.
func (t *Transport) Stats() Stats {
	s := t.Endpoint.Stats()
	return Stats{Refused: t.refused.Load(), ProtocolErrors: s.ProtocolErrors, PeersLost: s.PeersLost,
		SingleCopies: s.SingleCopies}
}

func newTransport(cfg Config) *Transport {
	t := &Transport{cfg: cfg, rank: cfg.Rank, size: cfg.Size, links: make([]*link, cfg.Size), ends: make([]msg.Link, cfg.Size)}
	for _, r := range cfg.Peers {
		l := newLink(t, r)
		t.links[r], t.ends[r] = l, l
	}
	return t
}

// start builds the Endpoint over the connected links (which msg.New
// closes when it fails).
func (t *Transport) start() (err error) {
	t.Endpoint, err = msg.New(msg.Config{Rank: t.rank, Size: t.size, Name: "shm", MaxBuffered: t.cfg.MaxBuffered,
		PeerTimeout: t.cfg.PeerTimeout, HeartbeatInterval: t.cfg.HeartbeatInterval,
		Poll: spin.PollBudget(envPoll, t.size)}, t.ends)
	return err
}

// closeLinks closes the links of a Connect that failed.
func (t *Transport) closeLinks() {
	for _, l := range t.links {
		if l != nil {
			l.Close()
		}
	}
}
