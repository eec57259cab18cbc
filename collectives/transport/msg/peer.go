package msg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/spin"
	"go.uber.org/zap"
)

// Peer is the Endpoint's side of one Link: the link calls it for each
// frame its peer sent, from one reader at a time per lane, in the order
// the frames arrived. A method that returns an error has found the peer
// breaking the protocol: the link then calls Protocol with it.
//
// Locks: the Endpoint calls the link's control methods (Answer, Retract,
// Consumed, Hold, Release, Wake) and Peer.Go may be called while it holds
// this Peer's lock, so a link calls the Peer holding no lock that those
// methods take. Besides the frames, a Peer gives its link what the
// Endpoint shares with it: the poll budget, the timeouts and goroutines
// that Close waits for.
type Peer struct {
	e     *Endpoint
	rank  int
	link  Link
	lim   Limits
	sc    SingleCopy    // the link's single copy, or nil
	gone  chan struct{} // closed when lost (or closed)
	down  atomic.Bool   // lost or closed: set with gone
	turns chan struct{} // rendezvous sends in flight (Limits.MaxRTS)

	mu      sync.Mutex
	lost    error // wraps ErrPeerLost (or is ErrClosed after Close)
	nextID  uint64
	maxID   uint64 // the highest id the peer announced
	sends   map[uint64]*sendOp
	queues  map[transport.Tag]*tagQ
	matched map[uint64]*inMsg // rendezvous messages answered Go (or being read)
	rts     int               // rendezvous messages held (queued or matched)
	inBuf   int64             // window bytes the peer filled and not yet handed back
	owed    int64             // of those, bytes consumed (to hand back)
	freeQ   []*tagQ           // recycled tag queues
	freeM   []*inMsg          // recycled eager messages
}

// newPeer is the Peer of link l to rank r, with the link's limits.
func newPeer(e *Endpoint, r int, l Link) (*Peer, error) {
	lim := l.Limits()
	if err := checkLimits(r, lim); err != nil {
		return nil, err
	}
	p := &Peer{e: e, rank: r, link: l, lim: lim, gone: make(chan struct{}),
		turns:   make(chan struct{}, lim.MaxRTS),
		sends:   make(map[uint64]*sendOp),
		queues:  make(map[transport.Tag]*tagQ),
		matched: make(map[uint64]*inMsg),
	}
	p.sc, _ = l.(SingleCopy)
	return p, nil
}

// Rank is the peer's rank.
func (p *Peer) Rank() int { return p.rank }

// Poll is the Endpoint's adaptive poll budget: how long a link's wait
// polls before it parks (Budget), told how long each wait took (Waited).
func (p *Peer) Poll() *spin.Adaptive { return &p.e.poll }

// PeerTimeout is how long the peer may stay silent before it is lost.
func (p *Peer) PeerTimeout() time.Duration { return p.e.cfg.PeerTimeout }

// HeartbeatInterval is how often the Endpoint calls the link's Tick.
func (p *Peer) HeartbeatInterval() time.Duration { return p.e.cfg.HeartbeatInterval }

// Go runs f on a goroutine the Endpoint's Close waits for, and reports
// whether it did: once Close has begun it runs nothing.
func (p *Peer) Go(f func()) bool { return p.e.goAdd(f) }

// Lost reports whether the peer is lost or the Endpoint closed.
func (p *Peer) Lost() bool { return p.down.Load() }

// checkLocked reports why an operation with p on tag may not start.
// p.mu is held.
func (p *Peer) checkLocked(tag transport.Tag) error {
	if p.e.closed.Load() {
		return transport.ErrClosed
	}
	if a := p.e.aborts.Of(tag); a != nil {
		return a
	}
	return p.lost
}

// lostErr is the error of an operation with p once p is down.
func (p *Peer) lostErr() error {
	if p.e.closed.Load() {
		return transport.ErrClosed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// sendErr is what a Send that failed with err returns: the transport's
// own errors as they are; a link's failure loses the peer.
func (p *Peer) sendErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, transport.ErrTimeout) || errors.Is(err, context.Canceled) ||
		errors.Is(err, transport.ErrAborted) || errors.Is(err, transport.ErrSizeMismatch) ||
		errors.Is(err, transport.ErrPeerLost) || errors.Is(err, transport.ErrClosed) {
		return err
	}
	if p.e.closed.Load() {
		return transport.ErrClosed
	}
	p.lose(fmt.Errorf("link: %w", err))
	if e := p.lostErr(); e != nil {
		return e
	}
	return err
}

// lose marks p lost for cause (nil: the Endpoint closes): its operations
// fail with ErrPeerLost (ErrClosed) and its link closes.
func (p *Peer) lose(cause error) {
	e := p.e
	p.mu.Lock()
	if p.lost != nil {
		p.mu.Unlock()
		return
	}
	if cause == nil || e.closed.Load() {
		p.lost = transport.ErrClosed
	} else {
		p.lost = fmt.Errorf("%w: %w", transport.ErrPeerLost, cause)
		e.lostPeers.Add(1)
		e.cfg.Logger.Warn("peer lost", zap.String("transport", e.cfg.Name),
			zap.Int("rank", e.cfg.Rank), zap.Int("peer", p.rank), zap.Error(cause))
	}
	p.down.Store(true)
	close(p.gone)
	p.failAllLocked(p.lost)
	p.mu.Unlock()
	p.link.Close()
}

// protocol drops p for breaking the protocol.
func (p *Peer) protocol(err error) {
	if !p.down.Load() && !p.e.closed.Load() {
		p.e.protoErrs.Add(1)
	}
	p.lose(fmt.Errorf("protocol error: %w", err))
}

// failAllLocked ends every operation with p with err. Eager messages that
// arrived whole stay receivable (what a peer sent before it went is
// delivered); the rest of what is held is dropped. p.mu is held.
func (p *Peer) failAllLocked(err error) {
	for tag, q := range p.queues {
		p.failPosted(q, err)
		if q.active != nil && q.active.op != nil {
			p.end(q.active.op, err)
		}
		kept := q.arrived[:0]
		for _, m := range q.arrived {
			if m.eager {
				kept = append(kept, m)
			}
		}
		clear(q.arrived[len(kept):])
		q.arrived, q.active = kept, nil
		if len(kept) == 0 {
			p.dropQueue(tag, q)
		}
	}
	for id, s := range p.sends {
		s.failWith(p, err)
		delete(p.sends, id)
	}
	for _, m := range p.matched {
		m.unhold(p, false)
	}
	clear(p.matched)
	p.rts, p.inBuf, p.owed = 0, 0, 0
}
