package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// aLongTimeAgo is a read deadline that wakes a blocked reader at once.
var aLongTimeAgo = time.Unix(1, 0)

// Where a frame's payload goes.
const (
	sinkDiscard = iota
	sinkBuf     // c.buf: an eager message nobody waits for yet, an abort's text
	sinkMsg     // c.m: a message going straight into its Recv's buffer
)

// readBuf is the size of a connection's read buffer. Payloads larger than
// half of it skip the buffer: they are read straight where they belong.
const readBuf = 64 << 10

// smallFrame is the largest payload copied behind its header into one
// write; larger ones go out with writev, straight from the caller's slice.
const smallFrame = 16 << 10

// conn is one authenticated TCP connection to a peer, used in both
// directions.
//
// Writes: a Send writes its frames itself, holding the write lock for one
// frame at a time (so other tags' frames interleave at frame boundaries)
// and giving up when its context ends, even mid-frame: the rest of that
// frame (at most MaxFrame bytes) is then copied and written first by the
// next writer or the flush goroutine, so frames always arrive whole. Control frames (CTS, credit,
// retract, abort, ping) are queued and written by a short-lived flush
// goroutine, so that a reader never blocks on a write.
//
// Reads: at most one reader at a time owns the read state below (reading)
// and parses frames, never waiting for anything but the socket. The reader
// is a Recv's own goroutine while that Recv waits for its message and no
// other reader runs (readFor: no hand-off from a reader goroutine to the
// Recv), or else a reader goroutine (readLoop), which runs while
// operations wait on it (waiters: Recvs parked for their message, Sends
// for their CTS) and stops once none does; the heartbeat reads idle
// connections briefly. A reader is stopped early by a read deadline in the
// past (kick), which is how a Recv that ends while a reader fills its
// buffer gets the buffer back at once.
type conn struct {
	t   *Transport
	p   *peer
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

	mu      sync.Mutex // reader lifecycle and read deadlines
	reading bool       // a reader owns the read state
	kicked  bool       // a kick's deadline is set and not consumed
	// lingering: the reader reads on to its deadline, waited on or not
	// (the heartbeat's reader; a reader after large frames, see bulk).
	lingering bool
	dead      bool
	// waiters counts what waits for a reader of c: operations parked
	// until it delivers their frame, and rendezvous messages matched to a
	// Recv whose bytes are still to come on c. Raised under mu (or by a
	// reader, or before the raiser calls readFor); lowered by their end.
	waiters atomic.Int32

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
	left       int // payload bytes of cur still to read
	sink       int
	buf        []byte // sinkBuf
	boff       int
	m          *inMsg // sinkMsg
	roff       int    // sinkMsg: offset in the Recv's buffer
	// bulk: the last frame with a payload had a large one. A reader
	// goroutine that nothing waits on then lingers (more large frames
	// likely follow, and restarting a reader for each costs more than
	// its wake-ups save); after small ones it stops at once, so that the
	// next Recv reads its message itself.
	bulk      bool
	readSince bool // bytes read since the lingering reader's deadline was set
	nowait    bool // reads do not wait (a Recv polls; see poll.go)
}

func newConn(p *peer, idx int, nc net.Conn) *conn {
	c := &conn{t: p.t, p: p, idx: idx, nc: nc, rbuf: make([]byte, readBuf),
		wsem: make(chan struct{}, 1), wbuf: make([]byte, 0, hdrSize+smallFrame)}
	if sc, ok := nc.(syscall.Conn); ok {
		c.rc, _ = sc.SyscallConn()
	}
	return c
}

// protoError marks a read error as the peer breaking the protocol.
type protoError struct{ err error }

func (e protoError) Error() string { return e.err.Error() }
func (e protoError) Unwrap() error { return e.err }

func protoErrorf(format string, a ...any) error { return protoError{fmt.Errorf(format, a...)} }

// startLocked starts a reader goroutine with the given deadline. c.mu is
// held.
func (c *conn) startLocked(deadline time.Time) {
	_ = c.nc.SetReadDeadline(deadline)
	c.kicked = false
	c.lingering = false
	if c.t.goAdd(c.readLoop) {
		c.reading = true
	}
}

// startDrainLocked starts a reader goroutine that reads for drainLinger
// from when it runs (not from now: on a busy machine it may start late,
// and a deadline already past would let it read nothing, leaving a
// talking peer silent to the heartbeat). c.mu is held.
func (c *conn) startDrainLocked() {
	c.kicked = false
	c.lingering = true
	if c.t.goAdd(func() {
		c.mu.Lock()
		if !c.kicked {
			_ = c.nc.SetReadDeadline(time.Now().Add(drainLinger))
		}
		c.mu.Unlock()
		c.readLoop()
	}) {
		c.reading = true
	}
}

// ensureReader starts a reader goroutine if something waits for one and
// none runs.
func (c *conn) ensureReader() {
	if c.waiters.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead && !c.reading && c.waiters.Load() > 0 {
		c.startLocked(time.Time{})
	}
}

// await registers an operation that waits for a reader of c to deliver
// its frame, starting a reader goroutine if none runs. The operation's end
// calls unwait.
func (c *conn) await() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiters.Add(1)
	if !c.dead && !c.reading {
		c.startLocked(time.Time{})
	}
}

// unwait ends what await began. An operation that ends by anything but its
// frame (failed, not delivered) kicks a reader that might now wait for no
// one, so that it stops and frees c for a Recv that would read it itself.
func (c *conn) unwait(delivered bool) {
	if c.waiters.Add(-1) == 0 && !delivered {
		c.kick()
	}
}

// drain starts a short reader if none runs (the heartbeat's reading of an
// idle connection).
func (c *conn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reading || c.dead {
		return
	}
	c.startDrainLocked()
}

// stopIfIdle ends a reader goroutine's reading, between frames, when
// nothing waits on it, and reports whether it did. A lingering reader
// reads on to its deadline; after large frames the reader starts to
// linger instead of stopping.
func (c *conn) stopIfIdle() bool {
	if c.left > 0 || c.hn > 0 {
		return false // a frame is coming in: finish it
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.dead:
	case c.waiters.Load() > 0 || c.lingering:
		return false
	case c.bulk:
		c.lingerLocked()
		return false
	}
	c.reading = false
	return true
}

// lingerLocked makes the reader read on for linger. c.mu is held.
func (c *conn) lingerLocked() {
	c.lingering = true
	c.readSince = false
	_ = c.nc.SetReadDeadline(time.Now().Add(linger))
}

// kick wakes the reader out of a blocked read.
func (c *conn) kick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reading && !c.dead {
		c.kicked = true
		_ = c.nc.SetReadDeadline(aLongTimeAgo)
	}
}

// shut closes the connection; its goroutines end.
func (c *conn) shut() {
	c.mu.Lock()
	c.dead = true
	c.mu.Unlock()
	c.qmu.Lock()
	c.qdead = true
	c.ctl = nil
	c.qmu.Unlock()
	_ = c.nc.Close()
}

func (c *conn) touch() {
	c.lastRead.Store(c.t.now())
	c.readSince = true
}

// writeFrame writes a frame with no context (tests).
func (c *conn) writeFrame(f *frame, payload []byte) error {
	_, err := c.write(context.Background(), f, payload)
	return err
}

// lock takes the write lock unless ctx ends or the peer goes first.
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
	case <-c.p.gone:
		return c.p.lostErr()
	}
}

func (c *conn) unlock() { <-c.wsem }

// write writes frame f and its payload from the caller's goroutine. When
// ctx ends first it returns ctx's error, with sent reporting whether the
// frame started out (it will then arrive whole: its rest is copied and
// written before anything else) or not at all.
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
	var hb [hdrSize]byte
	var n int
	if len(payload) <= smallFrame {
		// One write of a copy costs less than a writev of two pieces.
		b := append(c.wbuf[:0], hb[:]...)
		putFrame(b, f)
		b = append(b, payload...)
		c.wbuf = b[:0]
		// Most small frames fit the socket's buffer at once: then no
		// deadline needs arming for ctx.
		n = c.tryWrite(b)
		if n < len(b) {
			var k int
			k, err = c.writeWithin(ctx, b[n:])
			n += k
		}
		if err != nil && n > 0 {
			c.partial = append([]byte(nil), b[n:]...)
		}
	} else {
		putFrame(hb[:], f)
		n, err = c.writeWithin(ctx, hb[:], payload)
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
	}
	if err != nil {
		if n > 0 {
			c.leftover()
		}
		return n > 0, c.cut(ctx, err)
	}
	c.lastWrite.Store(c.t.now())
	return true, nil
}

// cut is the error of a write that failed: ctx's once it ended (the write
// was cut short for it), else the socket's.
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
	if !c.qdead && !c.flushing && c.t.goAdd(c.flush) {
		c.flushing = true
	}
}

// writeWithin writes bufs, cut short by a write deadline in the past once
// ctx ends. It returns the bytes written.
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
	if !c.flushing && c.t.goAdd(c.flush) {
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
// until nothing is left. Its writes have no deadline: a peer that stops
// reading is lost after PeerTimeout, which closes the connection.
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
			c.p.lose(fmt.Errorf("write: %w", err))
			return
		}
		c.lastWrite.Store(c.t.now())
	}
}

// readLoop is the reader goroutine: it reads while operations wait on it
// (a deadline, a kick or the heartbeat's, ends it when none does).
func (c *conn) readLoop() {
	for {
		err := c.step()
		if err == nil {
			if c.waiters.Load() == 0 && c.stopIfIdle() {
				return
			}
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.mu.Lock()
			lingered := c.lingering
			c.kicked, c.lingering = false, false
			switch {
			case c.dead:
			case c.waiters.Load() > 0 || c.left > 0 || c.hn > 0:
				_ = c.nc.SetReadDeadline(time.Time{})
				c.mu.Unlock()
				continue
			case lingered && c.bulk && c.readSince:
				c.lingerLocked() // large frames still come
				c.mu.Unlock()
				continue
			}
			c.reading = false
			c.mu.Unlock()
			return
		}
		c.failed(err)
		return
	}
}

// failed ends c's reading after a read error err (not a deadline): c is
// dead and, unless it was already, its peer is lost.
func (c *conn) failed(err error) {
	c.mu.Lock()
	c.reading = false
	dead := c.dead
	c.dead = true
	c.mu.Unlock()
	if dead {
		return
	}
	var pe protoError
	switch {
	case errors.As(err, &pe):
		c.p.protocol(pe.err)
	case errors.Is(err, io.EOF):
		c.p.ended(c, readError(err))
	default:
		c.p.lose(readError(err))
	}
}

// endGrace bounds how long a peer whose connection ended cleanly (EOF)
// waits for its other connections to end too.
const endGrace = 100 * time.Millisecond

// ended loses p once connection c has ended cleanly (the peer closed it,
// having written everything before): at once where c was the only one,
// else once p's other connections have ended too, or after endGrace. A
// peer that goes closes all its connections, and each delivers what was
// written on it before its end: what the peer sent on another connection
// before it went is read, not dropped with the loss.
func (p *peer) ended(c *conn, cause error) {
	deadline := time.Now().Add(endGrace)
	for time.Now().Before(deadline) && !p.t.closed.Load() {
		open := false
		for _, o := range p.conns {
			if o != nil && o != c {
				o.drain() // read it to its end
				o.mu.Lock()
				open = open || !o.dead
				o.mu.Unlock()
			}
		}
		if !open {
			break
		}
		time.Sleep(time.Millisecond)
	}
	p.lose(cause)
}

// readFor reads c on the calling goroutine until Recv r has ended, when no
// reader owns c: the Recv's own goroutine takes its message off the socket
// (and any frame before it), with no reader goroutine to wake it. A done
// ctx ends r (and kicks the read). It returns true once r has ended,
// handing c to a reader goroutine if operations wait on one. When another
// reader owns c it reads nothing: r waits on that reader (await; r's end
// calls unwait), and it returns false.
func (c *conn) readFor(ctx context.Context, r *op) bool {
	p := c.p
	p.mu.Lock() // before c.mu, as end (which kicks) takes them
	if r.state == opDone {
		p.mu.Unlock()
		return true
	}
	c.mu.Lock()
	if c.reading || c.dead {
		if !c.dead {
			c.waiters.Add(1)
			r.wc = c
		}
		c.mu.Unlock()
		p.mu.Unlock()
		return false
	}
	c.reading = true
	c.kicked, c.lingering = false, false
	_ = c.nc.SetReadDeadline(time.Time{}) // a former reader's may be left
	c.mu.Unlock()
	p.mu.Unlock()
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			c.p.mu.Lock()
			c.p.end(r, transport.CtxError(ctx))
			c.p.mu.Unlock()
			c.kick()
		})
		defer stop()
	}
	// Poll first (see poll.go), then wait in the netpoller.
	budget := c.t.poll.Budget()
	c.nowait = budget > 0
	var clock spin.PollClock
	start := time.Now()
	for len(r.done) == 0 {
		err := c.step()
		if err == nil {
			continue
		}
		if err == errWouldBlock {
			if !clock.More(&c.t.poll, budget) {
				c.nowait = false
			}
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.mu.Lock()
			if c.dead {
				c.nowait = false
				c.reading = false
				c.mu.Unlock()
				return true
			}
			c.kicked = false
			_ = c.nc.SetReadDeadline(time.Time{})
			c.mu.Unlock()
			continue
		}
		c.nowait = false
		c.failed(err)
		return true
	}
	c.nowait = false
	c.t.poll.Waited(time.Since(start))
	c.mu.Lock()
	c.reading = false
	if !c.dead && (c.waiters.Load() > 0 || c.left > 0 || c.hn > 0) {
		c.startLocked(time.Time{})
	}
	c.mu.Unlock()
	return true
}

func readError(err error) error {
	if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
		return fmt.Errorf("connection closed: %w", err)
	}
	return fmt.Errorf("read: %w", err)
}

// step reads once from the socket and processes what it read.
func (c *conn) step() error {
	if c.rpos == c.rend && c.left > 0 {
		switch {
		case c.sink == sinkMsg:
			if done, err := c.readIntoMsg(); done {
				return err
			}
		case c.sink == sinkBuf && c.left >= readBuf/2:
			n, err := c.read(c.buf[c.boff : c.boff+c.left])
			if n > 0 {
				c.touch()
				c.boff += n
				c.left -= n
				if c.left == 0 {
					if e := c.finish(); e != nil {
						return e
					}
				}
			}
			return err
		}
	}
	if c.rpos == c.rend {
		n, err := c.read(c.rbuf)
		if n > 0 {
			c.touch()
			c.rpos, c.rend = 0, n
		}
		if err != nil {
			if n > 0 {
				if e := c.consume(); e != nil {
					return e
				}
			}
			return err
		}
	}
	return c.consume()
}

// readIntoMsg reads straight from the socket into the buffer of the Recv
// receiving c.m. It reports done = false when that Recv has ended (the
// bytes are then read and dropped the ordinary way).
func (c *conn) readIntoMsg() (done bool, err error) {
	p := c.p
	p.mu.Lock()
	m := c.m
	r := m.op
	if r == nil || r.busy {
		p.mu.Unlock()
		return false, nil
	}
	r.busy = true
	r.c = c
	dst := r.buf[c.roff : c.roff+c.left]
	p.mu.Unlock()

	n, err := c.read(dst)
	if n > 0 {
		c.touch()
	}
	p.mu.Lock()
	r.busy = false
	m.got += n
	c.roff += n
	c.left -= n
	if r.stop != nil {
		stop := r.stop
		r.stop = nil
		p.end(r, stop)
	}
	p.mu.Unlock()
	if c.left == 0 {
		if e := c.finish(); e != nil {
			return true, e
		}
	}
	return true, err
}

// consume parses the buffered bytes.
func (c *conn) consume() error {
	for c.rpos < c.rend {
		if c.left == 0 {
			k := copy(c.hdr[c.hn:], c.rbuf[c.rpos:c.rend])
			c.hn += k
			c.rpos += k
			if c.hn < hdrSize {
				return nil
			}
			c.hn = 0
			f, err := decodeFrame(c.hdr[:], c.t.cfg.MaxFrame)
			if err != nil {
				return protoError{err}
			}
			if err := c.begin(&f); err != nil {
				return err
			}
			continue
		}
		k := min(c.left, c.rend-c.rpos)
		c.piece(c.rbuf[c.rpos : c.rpos+k])
		c.rpos += k
		c.left -= k
		if c.left == 0 {
			if err := c.finish(); err != nil {
				return err
			}
		}
	}
	return nil
}

// piece takes payload bytes of the current frame from the read buffer.
func (c *conn) piece(b []byte) {
	switch c.sink {
	case sinkBuf:
		c.boff += copy(c.buf[c.boff:], b)
	case sinkMsg:
		p := c.p
		p.mu.Lock()
		c.m.got += len(b)
		if r := c.m.op; r != nil {
			copy(r.buf[c.roff:], b)
		}
		c.roff += len(b)
		p.mu.Unlock()
	}
}

// begin acts on a frame header and sets up where its payload goes.
func (c *conn) begin(f *frame) error {
	c.cur = *f
	c.left = int(f.Len)
	c.sink = sinkDiscard
	c.m, c.buf, c.boff, c.roff = nil, nil, 0, 0
	if f.Len > 0 {
		c.bulk = f.Len >= readBuf/2
	}
	p := c.p
	t := c.t
	tag := transport.Tag{Group: f.Group, Seq: f.Seq, Step: f.Step}
	switch f.Type {
	case fEager:
		n := int(f.Len)
		cost := int64(n) + msgOverhead
		p.mu.Lock()
		if p.lost != nil {
			p.mu.Unlock()
			break
		}
		if p.inBuf+cost > int64(t.cfg.MaxBuffered) {
			used := p.inBuf
			p.mu.Unlock()
			return protoErrorf("an eager message of %d bytes overruns the window (%d of %d bytes in use)", n, used, t.cfg.MaxBuffered)
		}
		p.inBuf += cost
		if t.aborted(tag) != nil {
			p.consumed(cost)
			p.mu.Unlock()
			break
		}
		q := p.queues[tag]
		if q != nil && q.active == nil && len(q.arrived) == 0 && len(q.posted) > 0 {
			// A Recv waits: the bytes go straight into its buffer.
			r := q.posted[0]
			q.posted[0] = nil
			q.posted = q.posted[1:]
			r.state = opMatched
			if len(r.buf) != n {
				p.consumed(cost)
				p.end(r, sizeErr(n, len(r.buf)))
				p.tidy(tag, q)
				p.mu.Unlock()
				break
			}
			m := &inMsg{tag: tag, eager: true, size: n, cost: cost, op: r}
			r.m = m
			q.active = m
			c.m = m
			c.sink = sinkMsg
		} else {
			m := &inMsg{tag: tag, eager: true, size: n, cost: cost, data: make([]byte, n)}
			c.m = m
			c.buf = m.data
			c.sink = sinkBuf
		}
		p.mu.Unlock()
	case fRTS:
		p.mu.Lock()
		if p.lost == nil && t.aborted(tag) == nil {
			// The sender holds at most maxRTS; its retractions and aborts
			// reach this rank a little after it reuses their slots.
			if p.rts >= 4*maxRTS {
				p.mu.Unlock()
				return protoErrorf("more than %d messages announced", 4*maxRTS)
			}
			if f.Size > 1<<62 {
				p.mu.Unlock()
				return protoErrorf("a message of %d bytes announced", f.Size)
			}
			p.rts++
			q := p.queue(tag)
			q.arrived = append(q.arrived, &inMsg{tag: tag, size: int(f.Size), id: f.ID, c: c})
			p.match(tag, q)
		}
		p.mu.Unlock()
	case fCTS:
		p.mu.Lock()
		s := p.sends[f.ID]
		p.mu.Unlock()
		if s == nil {
			c.enqueue((&frame{Type: fRetract, ID: f.ID}).bytes())
			break
		}
		select {
		case s.cts <- f.Flags:
		default:
		}
		s.unwait(true)
	case fChunk:
		p.mu.Lock()
		if p.lost != nil {
			p.mu.Unlock()
			break
		}
		m := p.matched[f.ID]
		if m == nil || f.Size != uint64(m.got) || f.Size+uint64(f.Len) > uint64(m.size) {
			p.mu.Unlock()
			return protoErrorf("unexpected chunk of message %d at offset %d (%d bytes)", f.ID, f.Size, f.Len)
		}
		c.m = m
		c.roff = m.got
		c.sink = sinkMsg
		p.mu.Unlock()
	case fRetract:
		p.mu.Lock()
		if p.lost == nil {
			p.retract(f.ID)
		}
		p.mu.Unlock()
	case fCredit:
		p.mu.Lock()
		if p.lost == nil {
			if f.Size > uint64(p.window) || p.credit+int64(f.Size) > int64(p.window) {
				p.mu.Unlock()
				return protoErrorf("credit of %d bytes over the window of %d", f.Size, p.window)
			}
			p.credit += int64(f.Size)
		}
		p.mu.Unlock()
	case fAbort:
		if f.Origin != uint32(p.rank) {
			return protoErrorf("abort from rank %d on rank %d's connection", f.Origin, p.rank)
		}
		c.buf = make([]byte, f.Len)
		c.sink = sinkBuf
	case fPing:
	}
	if c.left == 0 {
		return c.finish()
	}
	return nil
}

// finish acts on a frame whose payload has arrived.
func (c *conn) finish() error {
	p := c.p
	f := &c.cur
	switch {
	case f.Type == fAbort:
		c.t.remoteAbort(p, f, c.buf)
	case f.Type == fEager && c.sink == sinkBuf:
		m := c.m
		p.mu.Lock()
		switch {
		case p.lost != nil:
		case c.t.aborted(m.tag) != nil:
			p.consumed(m.cost)
		default:
			q := p.queue(m.tag)
			q.arrived = append(q.arrived, m)
			p.match(m.tag, q)
		}
		p.mu.Unlock()
	case f.Type == fEager && c.sink == sinkMsg:
		m := c.m
		p.mu.Lock()
		if p.lost == nil {
			p.consumed(m.cost)
			if r := m.op; r != nil {
				p.end(r, nil)
			}
			if q := p.queues[m.tag]; q != nil && q.active == m {
				q.active = nil
				p.match(m.tag, q)
			}
		}
		p.mu.Unlock()
	case f.Type == fChunk && c.sink == sinkMsg:
		m := c.m
		p.mu.Lock()
		if p.lost == nil && m.got == m.size {
			if q := p.complete(m); q != nil {
				p.match(m.tag, q)
			}
		}
		p.mu.Unlock()
	}
	c.sink = sinkDiscard
	c.m, c.buf = nil, nil
	return nil
}

// retract drops the message id the peer gave up: a queued one leaves its
// queue; a matched one gives its Recv back to the head of the queue, to
// take the next message. p.mu is held.
func (p *peer) retract(id uint64) {
	if m := p.matched[id]; m != nil {
		delete(p.matched, id)
		p.rts--
		m.c.unwait(true)
		q := p.queue(m.tag)
		if r := m.op; r != nil && r.state == opMatched && !r.busy {
			m.op = nil
			r.m = nil
			r.state = opPosted
			q.posted = append([]*op{r}, q.posted...)
		}
		if q.active == m {
			q.active = nil
		}
		p.match(m.tag, q)
		return
	}
	for tag, q := range p.queues {
		for i, m := range q.arrived {
			if !m.eager && m.id == id {
				q.arrived = append(q.arrived[:i], q.arrived[i+1:]...)
				p.rts--
				p.tidy(tag, q)
				return
			}
		}
	}
}
