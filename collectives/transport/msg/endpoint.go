package msg

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/awake"
	"github.com/choreo-gpu/choreo/internal/spin"
	"go.uber.org/zap"
)

// Endpoint is one rank's endpoint of a group, over one Link per peer. It
// implements transport.Transport, transport.TrySender and
// transport.Retirer (not PeerAccess), and LosePeer.
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
// messages that arrived whole stay receivable. A peer lost for its
// silence is first told so (an eviction notice, sent best effort): a rank
// that receives one is evicted, and every pending and later call on its
// Endpoint fails with an error wrapping both transport.ErrEvicted and
// transport.ErrPeerLost. Retire refuses a group's messages for good (see
// transport.Retirer); a rendezvous announce of a retired group is
// answered with an abort of its collective whose cause wraps
// transport.ErrStale. The Endpoint's own goroutines are its heartbeat
// and those its links start through Peer.Go; Close waits for all of them.
type Endpoint struct {
	cfg   Config
	peers []*Peer // nil at cfg.Rank

	closed atomic.Bool
	done   chan struct{} // closed by Close

	gmu     sync.Mutex // guards stopped, timer and wg.Add
	stopped bool
	wg      sync.WaitGroup
	timer   *time.Timer

	aborts  transport.Aborts      // the collectives aborted here, bounded
	retired transport.Retired     // the groups retired here, bounded
	evicted atomic.Pointer[error] // set once this rank was evicted: what its calls fail with
	poll    spin.Adaptive         // how long a wait polls (links use it)
	alive   *awake.Clock          // the heartbeat's own stalls (Unix nanoseconds)

	protoErrs, lostPeers, singleCopies atomic.Uint64
	closeOnce                          sync.Once
}

var (
	_ transport.Transport = (*Endpoint)(nil)
	_ transport.TrySender = (*Endpoint)(nil)
	_ transport.Retirer   = (*Endpoint)(nil)
)

// New builds the endpoint of cfg.Rank over links (indexed by rank,
// links[cfg.Rank] nil) and starts them and the heartbeat. On an error it
// closes the links.
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
	e.alive = awake.New(int64(cfg.HeartbeatInterval), time.Now().UnixNano())
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
	// When each peer was heard as this Endpoint starts (a first heartbeat,
	// which also pings it): a later reading means the peer's Endpoint runs.
	for _, p := range e.peers {
		if p != nil {
			p.first = p.link.Tick()
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

func (e *Endpoint) Rank() int { return e.cfg.Rank }

func (e *Endpoint) Size() int { return e.cfg.Size }

// Stats counts the peers an Endpoint dropped for breaking the protocol
// (a malformed frame, a window overrun, an unknown chunk), the peers it
// lost for any reason, and the messages it received by reading the
// sender's memory (SingleCopy).
type Stats struct {
	ProtocolErrors, PeersLost, SingleCopies uint64
}

func (e *Endpoint) Stats() Stats {
	return Stats{ProtocolErrors: e.protoErrs.Load(), PeersLost: e.lostPeers.Load(),
		SingleCopies: e.singleCopies.Load()}
}

// wrap gives err its origin: the endpoint, the peer, the call and tag.
func (e *Endpoint) wrap(peer int, what string, tag transport.Tag, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: rank %d: peer %d: %s %v: %w", e.cfg.Name, e.cfg.Rank, peer, what, tag, err)
}

// peerOf is rank r's Peer, for an operation that ctx bounds.
func (e *Endpoint) peerOf(ctx context.Context, r int) (*Peer, error) {
	if r < 0 || r >= e.cfg.Size || r == e.cfg.Rank {
		return nil, transport.ErrBadPeer
	}
	return e.peers[r], transport.CtxError(ctx)
}

// LosePeer marks rank lost for cause, as if its link had ended (see
// Peer.Lose): a control plane that learns of a peer's death first calls
// it so that no operation waits for the peer timeout. An unknown rank,
// this rank, or a peer already lost is ignored.
func (e *Endpoint) LosePeer(rank int, cause error) {
	p, err := e.peerOf(context.Background(), rank)
	if err != nil {
		return
	}
	if cause == nil {
		cause = fmt.Errorf("rank %d reported lost", rank)
	}
	p.Lose(cause)
}

// Close shuts this endpoint down and returns once every goroutine it or
// its links started has ended.
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
				p.Lose(nil)
			}
		}
		e.wg.Wait()
	})
	return nil
}
