package shm

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// peer is this rank's state for one other rank: the pair's region (the
// lane this rank produces into, out, and the one it consumes, in), the
// pair's socket, the messages being matched, and the sends in flight.
//
// Locks, in the order they nest: live (read-held by every call that may
// touch the region; write-held to unmap it), cons (the consumer side of
// in), wmu (the producer side of
// out: one slot is filled at a time), mu (everything else), cmu (the
// producer side of out's control ring). The region is touched only by
// calls holding live, under mu while lost is nil, by the pump, and by
// Connect.
type peer struct {
	t    *Transport
	rank int

	// Set by Connect before start; constant afterwards (mem until unmap).
	sock     *sock
	mem      []byte
	out, in  *lane
	window   int // the peer's MaxBuffered: this rank's eager window toward it
	eagerMax int // the largest message sent eagerly to it
	cmaPID   int // the peer's process, when this one may read its memory (else 0)

	live     sync.RWMutex
	down     atomic.Bool   // lost or closed: set before gone closes
	gone     chan struct{} // closed when lost or closed
	lastRead atomic.Int64  // when the socket last delivered a frame
	turns    chan struct{} // rendezvous sends in flight (at most maxRTS)

	lmu     sync.Mutex // the pump's life
	running bool       // a pump goroutine runs
	armed   bool       // the socket has a read deadline (the pump's linger)

	unmapped atomic.Bool // the region is unmapped: no pump is needed

	smu   sync.Mutex
	space chan struct{} // closed (and replaced) when a SPACE frame arrives

	wmu  sync.Mutex
	sent uint64 // eager window bytes ever used toward the peer (under wmu)

	cmu sync.Mutex

	// cons is the consumer side of in: held by the pump, or by a call
	// polling for its own message (see poll), while it consumes.
	cons sync.Mutex

	mu       sync.Mutex
	lost     error // wraps ErrPeerLost (or is ErrClosed after Close)
	nextID   uint64
	sends    map[uint64]*sendOp
	queues   map[transport.Tag]*tagQ
	matched  map[uint64]*inMsg // rendezvous messages whose CTS went out
	rtsSeen  uint64            // the highest RTS id drained
	early    map[uint64]bool   // retractions of RTSes not drained yet
	rts      int               // rendezvous messages held (queued or matched)
	buffered int64             // window bytes of eager messages held
}

func newPeer(t *Transport, r int) *peer {
	return &peer{
		t: t, rank: r,
		gone:    make(chan struct{}),
		turns:   make(chan struct{}, maxRTS),
		space:   make(chan struct{}),
		sends:   make(map[uint64]*sendOp),
		queues:  make(map[transport.Tag]*tagQ),
		matched: make(map[uint64]*inMsg),
		early:   make(map[uint64]bool),
	}
}

// attach gives p its region and socket (Connect). lane 0 carries the
// lower rank's messages.
func (p *peer) attach(s *sock, mem []byte, g geometry, window int) {
	p.sock, p.mem, p.window = s, mem, window
	l0, l1 := laneAt(mem, g, 0), laneAt(mem, g, 1)
	if p.t.rank < p.rank {
		p.out, p.in = l0, l1
	} else {
		p.out, p.in = l1, l0
	}
	p.eagerMax = min(p.t.cfg.EagerMax, g.slotSize, window-msgOverhead)
}

// start begins p's life in the data plane: a first pump reads what the
// peer sent during Connect.
func (p *peer) start(now int64) {
	p.lastRead.Store(now)
	p.sock.lastWrite.Store(now)
	p.kick(drainLinger)
}

// checkLocked reports why an operation with p on tag may not start.
// p.mu is held.
func (p *peer) checkLocked(tag transport.Tag) error {
	if p.t.closed.Load() {
		return transport.ErrClosed
	}
	if a := p.t.aborts.Of(tag); a != nil {
		return a
	}
	return p.lost
}

// downErr is the error of an operation with p once p is down.
func (p *peer) downErr() error {
	if p.t.closed.Load() {
		return transport.ErrClosed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost == nil {
		return errors.New("peer down") // not reached: down is set under mu with lost
	}
	return p.lost
}

// lose marks p lost for cause (nil: this endpoint is closing): its
// operations fail with ErrPeerLost (ErrClosed), its socket closes, and a
// pump (started if none runs) unmaps the region.
func (p *peer) lose(cause error) {
	t := p.t
	p.mu.Lock()
	if p.lost != nil {
		p.mu.Unlock()
		return
	}
	if cause == nil || t.closed.Load() {
		p.lost = transport.ErrClosed
	} else {
		p.lost = fmt.Errorf("%w: %w", transport.ErrPeerLost, cause)
		t.lostPeers.Add(1)
	}
	p.down.Store(true)
	close(p.gone)
	p.failAllLocked(p.lost)
	p.mu.Unlock()
	if p.sock != nil {
		p.sock.shut()
		p.kick(0)
	}
}

// protocol drops p for breaking the protocol.
func (p *peer) protocol(err error) {
	if !p.down.Load() && !p.t.closed.Load() {
		p.t.protoErrs.Add(1)
	}
	p.lose(fmt.Errorf("protocol error: %w", err))
}

// unmap releases the region once no call can touch it: p is down (lost is
// set before), so calls that take live after this fail before they would;
// and under mu the region is touched only while lost is nil.
func (p *peer) unmap() {
	p.live.Lock()
	defer p.live.Unlock()
	p.mu.Lock()
	mem := p.mem
	p.mem = nil
	p.mu.Unlock()
	unmap(mem)
	p.unmapped.Store(true)
}

// spaceChan returns the channel the next SPACE frame closes.
func (p *peer) spaceChan() chan struct{} {
	p.smu.Lock()
	defer p.smu.Unlock()
	return p.space
}

// spaced wakes the senders waiting for room in out.
func (p *peer) spaced() {
	p.smu.Lock()
	close(p.space)
	p.space = make(chan struct{})
	p.smu.Unlock()
}

// notify rings the peer's doorbell if its pump sleeps and no call of the
// peer polls the lane: this rank just published slots or control entries
// in out.
func (p *peer) notify() {
	if p.out.polling.Load() != 0 {
		return // the poller consumes it, or does once it stops (see poll)
	}
	if s := p.out.sleep; s.Load() == 1 && s.CompareAndSwap(1, 0) {
		p.sock.send(dataFrame)
	}
}
