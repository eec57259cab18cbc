package shm

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/mesh"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// maxRTS is Limits.MaxRTS; it keeps the control ring (an entry per
// answer) from filling.
const maxRTS = ctlEntries / 2

// link is a msg.Link (and msg.SingleCopy) over one pair's region and
// socket: the lane this rank produces into (out), the one it consumes
// (in), and the socket for what must not wait for ring space.
//
// The region is touched only between enter and leave (a read lock on
// live that fails once the link is down); fail unmaps it under the write
// lock, and reports the loss only once the region is gone.
//
// Locks, in the order they nest: live, cons (the consumer side of in,
// held while calling the Peer), wmu (the producer side of out's slots),
// cmu (of out's control ring). The Peer may call Answer, Consumed, Hold,
// Release and Wake holding its own lock: they take none of live's write
// side, cons or wmu.
type link struct {
	cfg  *Config // this rank's
	rank int     // the peer's

	sock     *sock // these are set by newLink (mem until unmap)
	mem      []byte
	out, in  *lane
	window   int // the peer's MaxBuffered: this rank's eager window toward it
	eagerMax int // the largest message sent eagerly to it
	cmaPID   int // the peer's process, when this one may read its memory (else 0)
	peer     *msg.Peer

	live      sync.RWMutex
	down      atomic.Bool   // lost or closed: set (after err) before gone closes
	err       error         // why it is down: ErrPeerLost wrapping the cause, or ErrClosed
	gone      chan struct{} // closed when down
	downOnce  sync.Once
	unmapOnce sync.Once
	lastRead  atomic.Int64 // when the socket last delivered a frame (Unix ns)

	holds   atomic.Int64 // Holds and Waits in flight: the pump is active meanwhile
	lmu     sync.Mutex   // the pump's state
	running bool         // the pump goroutine was started
	parked  bool         // the pump reads the socket only (see settle)
	armed   bool         // the socket has a read deadline (the pump's linger)

	space signal       // a SPACE frame came: room in out
	waken signal       // the lane was read, or Wake called: Waits look again
	waits atomic.Int32 // Waits in flight
	wakes atomic.Int64 // Wake calls
	wmu   sync.Mutex
	sent  uint64 // eager window bytes ever used toward the peer (under wmu)
	cmu   sync.Mutex
	cons  sync.Mutex
	early map[uint64]bool // retractions of RTSes not consumed yet (under cons)

	omu    sync.Mutex
	offers map[uint64]bool // messages offered by address, handed to the Peer and not answered
}

var (
	_ msg.Link       = (*link)(nil)
	_ msg.SingleCopy = (*link)(nil)
)

var errProtocol = errors.New("protocol error")

// newLink is the link over an authenticated mesh link and the region
// Setup left in it (lane 0 carries the lower rank's messages).
func newLink(cfg *Config, ml mesh.Link) (*link, error) {
	nc := ml.Conn.(*net.UnixConn)
	r := ml.Extra.(*region)
	h, _ := decodeHello(ml.Hello) // checked by checkHello
	l := &link{cfg: cfg, rank: ml.Peer, gone: make(chan struct{}), early: make(map[uint64]bool),
		offers: make(map[uint64]bool), mem: r.mem, window: int(h.Window)}
	var err error
	if l.sock, err = newSock(l, nc); err != nil {
		return nil, err
	}
	l.out, l.in = laneAt(r.mem, r.g, 0), laneAt(r.mem, r.g, 1)
	if l.rank < cfg.Rank {
		l.out, l.in = l.in, l.out
	}
	l.eagerMax = min(cfg.EagerMax, r.g.slotSize, l.window-msg.Overhead)
	if cfg.CMAMin > 0 && h.Probe != 0 && (!cfg.cmaAuto || cmaPays()) {
		if id, err := peerPID(nc); err == nil && probeCMA(id, h.Probe) {
			l.cmaPID = id
		}
	}
	return l, nil
}

// Start starts a first pump for what the peer sent while the links
// connected.
func (l *link) Start(p *msg.Peer) {
	l.peer = p
	now := time.Now().UnixNano()
	l.lastRead.Store(now)
	l.sock.lastWrite.Store(now)
	l.kick(drainLinger)
}

func (l *link) Limits() msg.Limits {
	return msg.Limits{EagerMax: l.eagerMax, Chunk: l.out.slotSize, MaxRTS: maxRTS}
}

func (l *link) LaneOf(transport.Tag) int { return 0 }

// Tick pings the peer unless a frame went to it in the last half
// heartbeat and pumps an idle link briefly.
func (l *link) Tick() int64 {
	if time.Now().UnixNano()-l.sock.lastWrite.Load() >= int64(l.peer.HeartbeatInterval()/2) {
		l.Ping()
	}
	l.kick(drainLinger)
	return l.lastRead.Load()
}

func (l *link) Ping() { l.sock.send(pingFrame) }

func (l *link) Close() { l.fail(nil) }

func (l *link) goAdd(f func()) bool { return l.peer != nil && l.peer.Go(f) }

// enter read-locks the region, reporting false (and holding nothing) once
// the link is down or going down.
func (l *link) enter() bool {
	if !l.live.TryRLock() {
		return false
	}
	if l.mem == nil {
		l.live.RUnlock()
		return false
	}
	return true
}

func (l *link) leave() { l.live.RUnlock() }

// fail takes the link down for cause (nil: it closes) and tells the Peer,
// once. The caller holds no read lock of live.
func (l *link) fail(cause error) {
	if l.takeDown(cause) && cause != nil {
		l.report(cause)
	}
}

// takeDown marks l down, shuts its socket and unmaps its region once no
// call uses it; it reports whether l was up.
func (l *link) takeDown(cause error) (first bool) {
	l.downOnce.Do(func() {
		first = true
		l.err = transport.ErrClosed
		if cause != nil {
			l.err = fmt.Errorf("%w: %w", transport.ErrPeerLost, cause)
		}
		l.down.Store(true)
		close(l.gone)
		l.sock.shut()
		l.waken.fire()
	})
	l.unmapOnce.Do(func() {
		l.live.Lock()
		mem := l.mem
		l.mem = nil
		l.live.Unlock()
		unmap(mem)
	})
	return first
}

func (l *link) report(cause error) {
	switch {
	case l.peer == nil:
	case errors.Is(cause, errProtocol):
		l.peer.Protocol(cause)
	default:
		l.peer.Lose(cause)
	}
}

func protocol(err error) error { return fmt.Errorf("%w: %w", errProtocol, err) }

func (l *link) downErr() error {
	if !l.down.Load() {
		return transport.ErrPeerLost // not reached: enter fails only once down is set
	}
	return l.err
}

// signal wakes every goroutine waiting on its channel at once. A waiter
// takes the channel (C) before it looks at what it waits for; whoever
// changes that fires after the change: one of the two sees the other.
type signal struct {
	mu    sync.Mutex
	ch    chan struct{}
	taken atomic.Bool // someone may wait on ch
}

func (s *signal) C() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	s.taken.Store(true)
	return s.ch
}

func (s *signal) fire() {
	if !s.taken.Load() {
		return
	}
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.taken.Store(false)
	s.mu.Unlock()
}
