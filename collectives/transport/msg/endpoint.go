package msg

import (
	"cmp"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/spin"
	"go.uber.org/zap"
)

// Endpoint is one rank's endpoint of a group, over one Link per peer. It
// implements transport.Transport and transport.TrySender (not
// PeerAccess), and LosePeer.
//
// Contract: that of transport.Transport, with these particulars. A
// message of at most the link's EagerMax bytes is sent at once when the
// receiver's window has room, and Send returns nil once the link took it;
// a larger one waits for its Recv (rendezvous) and is then sent straight
// from the caller's slice, or read by the receiver from it (SingleCopy).
// A Recv that ends (context, Abort, Close) once its message was matched
// consumes that message, whose Send still returns nil. A peer whose link
// ends, that stays silent for PeerTimeout, or that breaks the protocol is
// lost: its operations fail with transport.ErrPeerLost, and eager
// messages that arrived whole stay receivable. The Endpoint's own
// goroutines are its heartbeat and those its links start through
// Peer.Go; Close waits for all of them.
type Endpoint struct {
	cfg   Config
	peers []*Peer // nil at cfg.Rank

	closed atomic.Bool
	done   chan struct{} // closed by Close

	gmu     sync.Mutex // guards stopped, timer and wg.Add
	stopped bool
	wg      sync.WaitGroup
	timer   *time.Timer

	aborts   transport.Aborts // the collectives aborted here, bounded
	poll     spin.Adaptive    // how long a wait polls (links use it)
	lastTick atomic.Int64     // when the heartbeat last ran (Unix nanoseconds)

	protoErrs, lostPeers, singleCopies atomic.Uint64
	closeOnce                          sync.Once
}

var (
	_ transport.Transport = (*Endpoint)(nil)
	_ transport.TrySender = (*Endpoint)(nil)
)

// New builds the endpoint of cfg.Rank over links (indexed by rank,
// links[cfg.Rank] nil): it reads every link's Limits, starts every link
// with its Peer and starts the heartbeat. On an error it closes the
// links.
func New(cfg Config, links []Link) (*Endpoint, error) {
	cfg.Name = cmp.Or(cfg.Name, "msg")
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if err := cfg.check(links); err != nil {
		closeLinks(links)
		return nil, err
	}
	e := &Endpoint{cfg: cfg, peers: make([]*Peer, cfg.Size), done: make(chan struct{})}
	e.poll.Init(cfg.Poll)
	e.lastTick.Store(time.Now().UnixNano())
	for r, l := range links {
		if l == nil {
			continue
		}
		p, err := newPeer(e, r, l)
		if err != nil {
			closeLinks(links)
			return nil, err
		}
		e.peers[r] = p
	}
	// Limits first: a link may hand over frames as soon as it starts.
	for _, p := range e.peers {
		if p != nil {
			p.link.Start(p)
		}
	}
	e.gmu.Lock()
	if cfg.Size > 1 {
		e.timer = time.AfterFunc(cfg.HeartbeatInterval, e.tick)
	}
	e.gmu.Unlock()
	return e, nil
}

func closeLinks(links []Link) {
	for _, l := range links {
		if l != nil {
			l.Close()
		}
	}
}

// Rank is this endpoint's rank.
func (e *Endpoint) Rank() int { return e.cfg.Rank }

// Size is the number of ranks in the group.
func (e *Endpoint) Size() int { return e.cfg.Size }

// Stats counts what an Endpoint dropped and how it received.
type Stats struct {
	// ProtocolErrors is the number of peers dropped for breaking the
	// protocol (a malformed frame, a window overrun, an unknown chunk).
	ProtocolErrors uint64
	// PeersLost is the number of peers lost, whatever the reason.
	PeersLost uint64
	// SingleCopies is the number of messages received by reading the
	// sender's memory (SingleCopy).
	SingleCopies uint64
}

// Stats returns the counters.
func (e *Endpoint) Stats() Stats {
	return Stats{ProtocolErrors: e.protoErrs.Load(), PeersLost: e.lostPeers.Load(),
		SingleCopies: e.singleCopies.Load()}
}

// goAdd runs f in a goroutine Close waits for; it returns false (and runs
// nothing) once Close has begun.
func (e *Endpoint) goAdd(f func()) bool {
	e.gmu.Lock()
	defer e.gmu.Unlock()
	if e.stopped {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
	return true
}

// wrap gives err its origin: the endpoint, the peer, the call and tag.
func (e *Endpoint) wrap(peer int, what string, tag transport.Tag, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: rank %d: peer %d: %s %v: %w", e.cfg.Name, e.cfg.Rank, peer, what, tag, err)
}

func (e *Endpoint) peerOf(r int) (*Peer, error) {
	if r < 0 || r >= e.cfg.Size || r == e.cfg.Rank {
		return nil, transport.ErrBadPeer
	}
	return e.peers[r], nil
}

// LosePeer marks rank lost for cause, as if its link had ended: its
// pending and future operations fail with transport.ErrPeerLost wrapping
// cause (eager messages that arrived whole stay receivable) and its link
// closes. A control plane that learns of a peer's death first calls it so
// that no operation waits for the peer timeout. An unknown rank, this
// rank, or a peer already lost is ignored.
func (e *Endpoint) LosePeer(rank int, cause error) {
	p, err := e.peerOf(rank)
	if err != nil {
		return
	}
	if cause == nil {
		cause = fmt.Errorf("rank %d reported lost", rank)
	}
	p.lose(cause)
}

// Close shuts this endpoint down: its operations fail with ErrClosed, its
// links close (so the peers' operations with it fail with ErrPeerLost),
// and it returns once every goroutine it or its links started has ended.
// Close is idempotent.
func (e *Endpoint) Close() error {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		close(e.done)
		e.gmu.Lock()
		e.stopped = true
		if e.timer != nil {
			e.timer.Stop()
		}
		e.gmu.Unlock()
		for _, p := range e.peers {
			if p != nil {
				p.lose(nil)
			}
		}
		e.wg.Wait()
	})
	return nil
}
