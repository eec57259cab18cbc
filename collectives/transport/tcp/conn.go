package tcp

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// aLongTimeAgo is a deadline that wakes a blocked read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

const (
	// readBuf is a connection's read buffer; a payload that does not
	// arrive with its header is read straight where it belongs.
	readBuf = 64 << 10
	// smallFrame is the largest payload copied behind its header into one
	// write; larger ones go out with writev, straight from the caller.
	smallFrame = 16 << 10
)

// conn is one authenticated TCP connection of a link (one of its lanes),
// used in both directions.
//
// Writes: a Send writes its frames itself, one frame at a time under the
// write lock, and gives up when its context ends, even mid-frame: the
// frame's rest is then copied and written first by the next writer or the
// flush goroutine. Control frames are queued and written by a short-lived
// flush goroutine, so that a reader never blocks on a write.
//
// Reads: one reader at a time owns the read state (reading): an
// operation's own goroutine in Wait when no other reader runs, or else a
// reader goroutine (readLoop), which runs while operations wait on it
// (waiters: Holds and Waits); the heartbeat reads idle connections
// briefly. A read deadline in the past (kick) stops a reader early, so
// that a Recv that ends while a reader fills its buffer gets it back.
type conn struct {
	l   *link
	idx int
	nc  net.Conn
	rc  syscall.RawConn // nc's descriptor, nil where it has none

	wsem      chan struct{} // the write lock: one frame at a time
	wbuf      []byte        // under wsem: a small frame's bytes
	partial   []byte        // under wsem: the rest of a frame cut short
	dmu       sync.Mutex    // orders write deadline changes
	wgen      uint64        // under dmu: which write a deadline is for
	lastRead  atomic.Int64
	lastWrite atomic.Int64
	rx        atomic.Int64 // bytes read

	mu        sync.Mutex // reader lifecycle and read deadlines
	reading   bool       // a reader owns the read state
	kicked    bool       // a kick's deadline is set and not consumed
	lingering bool       // the reader reads on to its deadline, waited on or not
	dead      bool
	waiters   atomic.Int32 // Holds and the Waits in ws: raised under mu
	ws        []*waiter    // under mu: Waits on another reader
	nws       atomic.Int32

	qmu      sync.Mutex
	ctl      []byte // queued control frames
	flushing bool
	resume   bool // a cut frame waits in partial
	qdead    bool

	// Read state, owned by the reader.
	rbuf       []byte
	rpos, rend int
	hdr        [hdrSize]byte
	hn         int
	cur        frame
	left       int       // payload bytes of cur still to read
	sink       *msg.Sink // where cur's payload goes (nil: text, or nowhere)
	text       []byte    // an abort's text
	toff       int
	// bulk: the last payload was large. A reader goroutine that nothing
	// waits on then lingers (more likely follow); after small ones it
	// stops at once, so that the next Recv reads its message itself.
	bulk      bool
	readSince bool // bytes read since the lingering reader's deadline was set
	nowait    bool // reads do not wait (a Wait polls; see poll.go)

	// Raw reads and writes that do not wait (see poll.go), with their
	// funcs made once so that a poll allocates nothing.
	pr, pw   rawOp
	prf, pwf func(fd uintptr) bool
}

func newConn(l *link, idx int, nc net.Conn) *conn {
	c := &conn{l: l, idx: idx, nc: nc, rbuf: make([]byte, readBuf),
		wsem: make(chan struct{}, 1), wbuf: make([]byte, 0, hdrSize+smallFrame)}
	if sc, ok := nc.(syscall.Conn); ok {
		c.rc, _ = sc.SyscallConn()
	}
	c.prf, c.pwf = c.pr.read, c.pw.write
	return c
}

// lock takes the write lock unless ctx ends or the link goes first.
func (c *conn) lock(ctx context.Context) error {
	select {
	case c.wsem <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.wsem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return transport.CtxError(ctx)
	case <-c.l.down:
		return errDown
	}
}

func (c *conn) unlock() { <-c.wsem }

// write writes frame f and its payload from the caller's goroutine. When
// ctx ends first it returns ctx's error, with sent reporting whether the
// frame started out (its rest is then written before anything else).
func (c *conn) write(ctx context.Context, f *frame, payload []byte) (sent bool, err error) {
	if err := c.lock(ctx); err != nil {
		return false, err
	}
	defer c.unlock()
	if err := transport.CtxError(ctx); err != nil {
		return false, err
	}
	if len(c.partial) > 0 {
		n, err := c.writeWithin(ctx, c.partial)
		c.partial = c.partial[n:]
		if err != nil {
			c.leftover()
			return false, c.cut(ctx, err)
		}
		c.partial = nil
	}
	var n int
	if len(payload) <= smallFrame {
		n, err = c.writeSmall(ctx, f, payload)
	} else {
		n, err = c.writeLarge(ctx, f, payload)
	}
	if err != nil {
		if n > 0 {
			c.leftover()
		}
		return n > 0, c.cut(ctx, err)
	}
	c.lastWrite.Store(c.l.now())
	return true, nil
}

// writeSmall writes f and payload as one copy (cheaper than a writev, and
// mostly taken by the socket at once, with no deadline to arm), keeping
// the rest in c.partial if it wrote some but not all.
func (c *conn) writeSmall(ctx context.Context, f *frame, payload []byte) (int, error) {
	var hb [hdrSize]byte
	b := append(c.wbuf[:0], hb[:]...)
	putFrame(b, f)
	b = append(b, payload...)
	c.wbuf = b[:0]
	n := c.tryWrite(b)
	var err error
	if n < len(b) {
		var k int
		k, err = c.writeWithin(ctx, b[n:])
		n += k
	}
	if err != nil && n > 0 {
		c.partial = append([]byte(nil), b[n:]...)
	}
	return n, err
}

// writeLarge writes f's header and payload with writev, keeping a copy of
// the rest in c.partial if it wrote some but not all.
func (c *conn) writeLarge(ctx context.Context, f *frame, payload []byte) (int, error) {
	var hb [hdrSize]byte
	putFrame(hb[:], f)
	n, err := c.writeWithin(ctx, hb[:], payload)
	if err != nil && n > 0 {
		rest := make([]byte, 0, hdrSize+len(payload)-n)
		if n < hdrSize {
			rest = append(rest, hb[n:]...)
			rest = append(rest, payload...)
		} else {
			rest = append(rest, payload[n-hdrSize:]...)
		}
		c.partial = rest
	}
	return n, err
}

// cut is the error of a failed write: ctx's once it ended, else err.
func (c *conn) cut(ctx context.Context, err error) error {
	if e := transport.CtxError(ctx); e != nil {
		return e
	}
	return err
}

// leftover makes sure the flush goroutine writes c.partial.
func (c *conn) leftover() {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	c.resume = true
	if !c.qdead && !c.flushing && c.l.goAdd(c.flush) {
		c.flushing = true
	}
}

// writeWithin writes bufs, cut short by a write deadline in the past once
// ctx ends.
func (c *conn) writeWithin(ctx context.Context, bufs ...[]byte) (int, error) {
	wr := func() (int, error) {
		if len(bufs) == 1 {
			return c.nc.Write(bufs[0])
		}
		nb := net.Buffers(bufs)
		n, err := nb.WriteTo(c.nc)
		return int(n), err
	}
	if ctx.Done() == nil {
		return wr()
	}
	c.dmu.Lock()
	gen := c.wgen
	c.dmu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		c.dmu.Lock()
		if c.wgen == gen {
			_ = c.nc.SetWriteDeadline(aLongTimeAgo)
		}
		c.dmu.Unlock()
	})
	n, err := wr()
	if !stop() {
		c.dmu.Lock()
		c.wgen++
		_ = c.nc.SetWriteDeadline(time.Time{})
		c.dmu.Unlock()
	}
	return n, err
}

// enqueue queues control frames b for the flush goroutine.
func (c *conn) enqueue(b []byte) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.qdead {
		return
	}
	c.ctl = append(c.ctl, b...)
	if !c.flushing && c.l.goAdd(c.flush) {
		c.flushing = true
	}
}

// ping queues a PING unless something is queued already.
func (c *conn) ping() {
	c.qmu.Lock()
	busy := c.flushing || len(c.ctl) > 0
	c.qmu.Unlock()
	if !busy {
		c.enqueue((&frame{Type: fPing}).bytes())
	}
}

// flush writes the rest of a cut frame, then the queued control frames,
// until nothing is left; with no deadline (a peer that stops reading is
// lost after PeerTimeout, which closes the connection).
func (c *conn) flush() {
	for {
		c.qmu.Lock()
		b := c.ctl
		c.ctl = nil
		if c.qdead || (len(b) == 0 && !c.resume) {
			c.flushing = false
			c.qmu.Unlock()
			return
		}
		c.resume = false
		c.qmu.Unlock()
		c.wsem <- struct{}{}
		var err error
		if len(c.partial) > 0 {
			_, err = c.nc.Write(c.partial)
			c.partial = nil
		}
		if err == nil && len(b) > 0 {
			_, err = c.nc.Write(b)
		}
		<-c.wsem
		if err != nil {
			c.qmu.Lock()
			c.flushing = false
			c.qmu.Unlock()
			c.l.lose(fmt.Errorf("write: %w", err))
			return
		}
		c.lastWrite.Store(c.l.now())
	}
}

// shut closes the connection; its goroutines end and its Waits return.
func (c *conn) shut() {
	c.mu.Lock()
	c.dead = true
	c.mu.Unlock()
	c.qmu.Lock()
	c.qdead = true
	c.ctl = nil
	c.qmu.Unlock()
	_ = c.nc.Close()
	c.wakeAll()
}

func (c *conn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}
