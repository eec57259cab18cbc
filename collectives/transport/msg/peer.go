package msg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/awake"
	"github.com/choreo-gpu/choreo/internal/spin"
	"go.uber.org/zap"
)

// Peer is the Endpoint's side of one Link: the link calls it for each
// frame its peer sent, from one reader at a time per lane, in order. A
// method that returns an error has found the peer breaking the protocol:
// the link then calls Protocol with it. The Endpoint calls the link's
// control methods (Answer, Retract, Consumed, Hold, Release, Wake) and
// Go holding this Peer's lock, so a link calls the Peer holding no lock
// that those take.
type Peer struct {
	e     *Endpoint
	rank  int
	link  Link
	lim   Limits
	sc    SingleCopy    // the link's single copy, or nil
	gone  chan struct{} // closed when lost (or closed)
	down  atomic.Bool   // lost or closed: set with gone
	turns chan struct{} // rendezvous sends in flight (Limits.MaxRTS)
	quiet awake.Silence // p's silence as the heartbeat counts it (its goroutine only)
	first int64         // when p was heard as the Endpoint started (set by New); heard only grows

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

func newPeer(e *Endpoint, r int, l Link) (*Peer, error) {
	lim := l.Limits()
	if lim.Chunk < 1 || lim.MaxRTS < 1 || lim.EagerMax < 0 {
		return nil, fmt.Errorf("msg: link to rank %d: %w: limits %+v", r, transport.ErrBadArgument, lim)
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

func (p *Peer) Rank() int { return p.rank }

// Poll is the Endpoint's poll budget: how long a link's wait polls before
// it parks, told how long each wait took.
func (p *Peer) Poll() *spin.Adaptive { return &p.e.poll }

// PeerTimeout is how long the peer may stay silent before it is lost.
func (p *Peer) PeerTimeout() time.Duration { return p.e.cfg.PeerTimeout }

// HeartbeatInterval is how often the Endpoint calls the link's Tick.
func (p *Peer) HeartbeatInterval() time.Duration { return p.e.cfg.HeartbeatInterval }

// Go runs f on a goroutine the Endpoint's Close waits for, and reports
// whether it did: once Close has begun it runs nothing.
func (p *Peer) Go(f func()) bool { return p.e.goRun(f) }

func (p *Peer) Lost() bool { return p.down.Load() }

// checkLocked reports why an operation with p on tag may not start.
// p.mu is held.
func (p *Peer) checkLocked(tag transport.Tag) error {
	e := p.e
	if e.closed.Load() {
		return transport.ErrClosed
	}
	if err := e.evictedErr(); err != nil {
		return err
	}
	if e.retired.Has(tag.Group) {
		return transport.StaleError(tag.Group)
	}
	if a := e.aborts.Of(tag); a != nil {
		return a
	}
	return p.lost
}

// lostErr is the error of an operation with p once p is down.
func (p *Peer) lostErr() error {
	if p.e.closed.Load() {
		return transport.ErrClosed
	}
	if err := p.e.evictedErr(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// sendErr is what a Send that failed with err returns: the transport's
// own errors as they are; a link's failure loses the peer. A link closed
// because the peer was lost (a write that waited in it) is that loss.
func (p *Peer) sendErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, transport.ErrClosed) && p.down.Load() && !p.e.closed.Load() {
		return p.lostErr()
	}
	if errors.Is(err, transport.ErrTimeout) || errors.Is(err, context.Canceled) ||
		errors.Is(err, transport.ErrAborted) || errors.Is(err, transport.ErrSizeMismatch) ||
		errors.Is(err, transport.ErrPeerLost) || errors.Is(err, transport.ErrClosed) ||
		errors.Is(err, transport.ErrStale) || errors.Is(err, transport.ErrEvicted) {
		return err
	}
	if p.e.closed.Load() {
		return transport.ErrClosed
	}
	p.Lose(fmt.Errorf("link: %w", err))
	if e := p.lostErr(); e != nil {
		return e
	}
	return err
}

// Lose declares the peer lost for cause: its operations fail with
// transport.ErrPeerLost (what arrived whole stays receivable) and its
// link closes. With a nil cause (the Endpoint's Close) they fail with
// transport.ErrClosed.
func (p *Peer) Lose(cause error) {
	if p.markLost(cause) {
		p.link.Close()
	}
}

// markLost is Lose but for closing the link; it reports whether p was
// up. Once this rank is evicted, the eviction is the cause.
func (p *Peer) markLost(cause error) bool {
	e := p.e
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost != nil {
		return false
	}
	switch ev := e.evictedErr(); {
	case cause == nil || e.closed.Load():
		p.lost = transport.ErrClosed
	case ev != nil:
		// A value of its own, unlike what checkLocked returns, so that
		// no message that arrived is received after the eviction.
		p.lost = fmt.Errorf("%w", ev)
		e.lostPeers.Add(1)
	default:
		p.lost = fmt.Errorf("%w: %w", transport.ErrPeerLost, cause)
		e.lostPeers.Add(1)
		e.cfg.Logger.Warn("peer lost", zap.String("transport", e.cfg.Name),
			zap.Int("rank", e.cfg.Rank), zap.Int("peer", p.rank), zap.Error(cause))
	}
	p.down.Store(true)
	close(p.gone)
	p.failAllLocked(p.lost)
	return true
}

// Protocol declares the peer lost for breaking the protocol (counted in
// the Endpoint's Stats).
func (p *Peer) Protocol(err error) {
	if !p.down.Load() && !p.e.closed.Load() {
		p.e.protoErrs.Add(1)
	}
	p.Lose(fmt.Errorf("protocol error: %w", err))
}

// failAllLocked ends every operation with p with err; eager messages that
// arrived whole stay receivable, the rest is dropped. p.mu is held.
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
