package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/mesh"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/internal/spin"
)

const (
	maxRTS = 4096 // msg.Limits.MaxRTS
	// linger is how long a reader goroutine that nothing waits on reads
	// on after large frames; drainLinger how long the heartbeat's reads.
	linger      = 20 * time.Millisecond
	drainLinger = 2 * time.Millisecond
	// endGrace bounds how long a link whose connection ended cleanly
	// (EOF) waits for its other connections to end too.
	endGrace = 100 * time.Millisecond
)

// link is a msg.Link over the ConnsPerPeer authenticated TCP connections
// of one pair of ranks, each a lane (see conn). It keeps the peer's eager
// window (credit, handed back by CREDIT frames) and reports the peer's
// end once.
type link struct {
	cfg   *Config // this rank's
	rank  int     // the peer's
	conns []*conn
	peer  *msg.Peer
	poll  *spin.Adaptive
	epoch time.Time // lastRead and lastWrite count from it

	maxFrame, window int        // the least the peer's connections announced
	limits           msg.Limits // Limits(), from Start on

	cmu    sync.Mutex
	credit int64 // bytes of the peer's window this rank may still fill

	down     chan struct{} // closed once lost or closed
	downOnce sync.Once
	closing  atomic.Bool // Close has begun: nothing is reported
}

var _ msg.Link = (*link)(nil)

func newLink(cfg *Config, rank int, ms []mesh.Link) *link {
	l := &link{cfg: cfg, rank: rank, conns: make([]*conn, len(ms)), epoch: time.Now(), down: make(chan struct{})}
	for i, ml := range ms {
		maxFrame, window := peerLimits(ml.Hello)
		if tc, ok := ml.Conn.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		l.conns[ml.Index] = newConn(l, ml.Index, ml.Conn)
		if i == 0 {
			l.maxFrame, l.window = maxFrame, window
		}
		l.maxFrame, l.window = min(l.maxFrame, maxFrame), min(l.window, window)
	}
	return l
}

func (l *link) now() int64 { return int64(time.Since(l.epoch)) }

func (l *link) goAdd(f func()) bool { return l.peer.Go(f) }

// errDown is what a write finds on a link gone down: the Endpoint returns
// the peer's loss (or its own close) instead.
var errDown = errors.New("tcp: link down")

func (l *link) Start(p *msg.Peer) {
	l.peer = p
	l.poll = p.Poll()
	l.limits = l.Limits()
	l.credit = int64(l.window)
	now := l.now()
	for _, c := range l.conns {
		c.lastRead.Store(now)
		c.lastWrite.Store(now)
	}
	for _, c := range l.conns {
		c.drain()
	}
}

func (l *link) Limits() msg.Limits {
	return msg.Limits{
		EagerMax: min(l.cfg.EagerMax, l.maxFrame, l.window-msg.Overhead),
		Chunk:    min(l.cfg.MaxFrame, l.maxFrame),
		MaxRTS:   maxRTS,
	}
}

// LaneOf: a collective's steps go round the connections from a place its
// (Group, Seq) hashes to, so that consecutive steps (a ring's chunks in
// flight) spread evenly over them.
func (l *link) LaneOf(tag transport.Tag) int {
	n := uint64(len(l.conns))
	if n == 1 {
		return 0
	}
	h := tag.Group*0x9E3779B97F4A7C15 ^ tag.Seq*0xC2B2AE3D27D4EB4F
	h ^= h >> 31
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 29
	return int((h%n + uint64(tag.Step)) % n)
}

func (l *link) connOf(tag transport.Tag) *conn { return l.conns[l.LaneOf(tag)] }

// Eager: a frame cut short by ctx is finished from a copy and arrives
// whole, so its Send succeeded.
func (l *link) Eager(ctx context.Context, tag transport.Tag, data []byte, _ bool) (bool, error) {
	n := len(data)
	cost := int64(n) + msg.Overhead
	if n > l.limits.EagerMax {
		return false, nil
	}
	l.cmu.Lock()
	if l.credit < cost {
		l.cmu.Unlock()
		return false, nil
	}
	l.credit -= cost
	l.cmu.Unlock()
	f := frame{Type: fEager, Len: uint32(n), Group: tag.Group, Seq: tag.Seq, Step: tag.Step}
	sent, err := l.connOf(tag).write(ctx, &f, data)
	if err == nil || (sent && ctx.Err() != nil) {
		return true, nil
	}
	l.cmu.Lock()
	l.credit += cost
	l.cmu.Unlock()
	return true, err
}

func (l *link) Announce(ctx context.Context, tag transport.Tag, id uint64, data []byte) (sent, offered bool, err error) {
	f := frame{Type: fRTS, Group: tag.Group, Seq: tag.Seq, Step: tag.Step, ID: id, Size: uint64(len(data))}
	sent, err = l.connOf(tag).write(ctx, &f, nil)
	return sent, false, err
}

func (l *link) Chunk(ctx context.Context, tag transport.Tag, id uint64, off int, part []byte) (bool, error) {
	f := frame{Type: fChunk, Len: uint32(len(part)), ID: id, Size: uint64(off)}
	return l.connOf(tag).write(ctx, &f, part)
}

func (l *link) Answer(lane int, id uint64, a msg.Answer) {
	l.conns[lane].enqueue((&frame{Type: fCTS, Flags: uint8(a), ID: id}).bytes())
}

func (l *link) Retract(tag transport.Tag, id uint64, ack bool) {
	f := frame{Type: fRetract, ID: id}
	if ack {
		f.Flags = retractAck
	}
	l.connOf(tag).enqueue(f.bytes())
}

func (l *link) Consumed(n int64) {
	l.conns[0].enqueue((&frame{Type: fCredit, Size: uint64(n)}).bytes())
}

func (l *link) credited(n uint64) error {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	if n > uint64(l.window) || l.credit+int64(n) > int64(l.window) {
		return fmt.Errorf("credit of %d bytes over the window of %d", n, l.window)
	}
	l.credit += int64(n)
	return nil
}

// Abort goes on every connection: the peer may be reading only the one
// its Recv's message comes on (it keeps the first copy).
func (l *link) Abort(a *transport.AbortError, at int64) {
	text := a.Cause.Error()
	if len(text) > maxAbortText {
		text = text[:maxAbortText]
	}
	f := frame{Type: fAbort, Len: uint32(len(text)), Group: a.Group, Seq: a.Seq,
		Origin: uint32(l.cfg.Rank), ID: uint64(at), Size: uint64(transport.CodeOf(a.Cause))}
	b := append(f.bytes(), text...)
	for _, c := range l.conns {
		c.enqueue(b)
	}
}

func (l *link) Ping() {
	for _, c := range l.conns {
		c.ping()
	}
}

func (l *link) Hold(lane int) { l.conns[lane].await() }

func (l *link) Release(lane int, _ bool) { l.conns[lane].unwait() }

func (l *link) Wait(ctx context.Context, lane int, ready func() bool) {
	l.conns[lane].wait(ctx, ready)
}

func (l *link) Wake(lane int) {
	c := l.conns[lane]
	c.kick()
	c.wakeAll()
}

// Tick pings the connections nothing was written on for half a
// heartbeat, has each read briefly and reports the one heard from least
// recently.
func (l *link) Tick() int64 {
	now := l.now()
	heard := now
	half := int64(l.peer.HeartbeatInterval()) / 2
	for _, c := range l.conns {
		heard = min(heard, c.lastRead.Load())
		if now-c.lastWrite.Load() >= half {
			c.ping()
		}
		c.drain()
		c.notify()
	}
	return l.epoch.UnixNano() + heard
}

// lose takes the link down for cause, once, closing its connections, and
// tells the Peer.
func (l *link) lose(cause error) {
	first := false
	l.downOnce.Do(func() {
		first = true
		close(l.down)
	})
	if !first {
		return
	}
	for _, c := range l.conns {
		if c != nil {
			c.shut()
		}
	}
	if l.closing.Load() {
		return
	}
	var pe protoError
	if errors.As(cause, &pe) {
		l.peer.Protocol(pe.err)
	} else {
		l.peer.Lose(cause)
	}
}

// ended takes the link down once connection c has ended cleanly, when the
// other connections have ended too (or after endGrace): what the peer
// sent on them before it went is read, not dropped with the loss.
func (l *link) ended(c *conn, cause error) {
	deadline := time.Now().Add(endGrace)
	for time.Now().Before(deadline) && !l.closing.Load() {
		open := false
		for _, o := range l.conns {
			if o != c {
				o.drain() // read it to its end
				open = open || !o.isDead()
			}
		}
		if !open {
			break
		}
		time.Sleep(time.Millisecond)
	}
	l.lose(cause)
}

func (l *link) Close() {
	l.closing.Store(true)
	l.lose(transport.ErrClosed)
}
