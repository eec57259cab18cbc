package tcp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/spin"
)

const (
	// maxRTS bounds the messages per peer and direction that wait for
	// their Recv (a sender waits for a slot; a receiver drops a peer that
	// announces four times more).
	maxRTS = 4096
	// linger is how long a reader goroutine that nothing waits on reads
	// on after large frames (and again while they keep coming);
	// drainLinger is how long a reader started by the heartbeat timer
	// reads when nothing waits on it.
	linger      = 20 * time.Millisecond
	drainLinger = 2 * time.Millisecond
)

// Transport is one rank's endpoint of a group whose ranks talk over TCP
// (see the package doc for the protocol). It implements
// transport.Transport, not transport.PeerAccess.
//
// Contract: that of transport.Transport, with these particulars. A message
// of at most EagerMax bytes is sent at once when the receiver's window
// (its MaxBuffered) has room, and Send returns nil once it is written; a
// larger one, or one that does not fit, waits for the receiver's Recv
// (rendezvous) and is then written straight from the caller's slice into
// the receiver's. A Recv that ends (context, Abort, Close) once its
// message was matched (the sender told to send) consumes that message,
// whose Send still returns nil. A Send whose context ends mid-frame
// returns at once; the frame's rest is finished from a copy (at most
// MaxFrame bytes): an eager message is then delivered and its Send returns
// nil, a rendezvous message is withdrawn. A peer that closes a connection
// is lost at once; one that stays silent for PeerTimeout is lost then;
// either way its operations fail with transport.ErrPeerLost, and so do
// they when the peer breaks the protocol. Goroutines run only while
// operations wait on them or for short heartbeats (a Recv may read its
// message itself: see the package doc); Close waits for all of them.
type Transport struct {
	cfg   Config
	rank  int
	size  int
	peers []*peer // nil at rank
	epoch time.Time

	lastTick atomic.Int64 // when the heartbeat last ran
	closed   atomic.Bool
	done     chan struct{} // closed by Close

	gmu     sync.Mutex // guards stopped and wg.Add
	stopped bool
	wg      sync.WaitGroup
	timer   *time.Timer

	aborts transport.Aborts // the collectives aborted here, bounded
	poll   spin.Adaptive    // how long a Recv polls its socket (see poll.go)

	refused, protoErrs, lostPeers atomic.Uint64
	closeOnce                     sync.Once
}

var _ transport.Transport = (*Transport)(nil)

// Stats counts what a Transport refused or dropped.
type Stats struct {
	// Refused is the number of connections refused during Connect: bad
	// handshakes (strangers, wrong secret, wrong group, garbage, replays)
	// and duplicates.
	Refused uint64
	// ProtocolErrors is the number of peers dropped for breaking the frame
	// protocol (an oversized frame, an unknown type, a window overrun).
	ProtocolErrors uint64
	// PeersLost is the number of peers lost, whatever the reason.
	PeersLost uint64
}

// Stats returns the counters.
func (t *Transport) Stats() Stats {
	return Stats{Refused: t.refused.Load(), ProtocolErrors: t.protoErrs.Load(), PeersLost: t.lostPeers.Load()}
}

// collKey names one collective, the unit Abort acts on.
type collKey struct{ group, seq uint64 }

func keyOf(t transport.Tag) collKey { return collKey{t.Group, t.Seq} }

// peer is this rank's state for one other rank.
type peer struct {
	t     *Transport
	rank  int
	conns []*conn
	gone  chan struct{} // closed when lost
	slots chan struct{} // rendezvous sends in flight

	// From the handshake: the peer's limits.
	maxFrame, window int
	// Derived at start: frame size and eager limit for sending.
	chunk, eagerMax int

	mu      sync.Mutex
	lost    error // wraps ErrPeerLost (or ErrClosed after Close)
	credit  int64 // bytes of the peer's window this rank may still fill
	nextID  uint64
	sends   map[uint64]*sendOp // rendezvous sends waiting for or past their CTS
	queues  map[transport.Tag]*tagQ
	matched map[uint64]*inMsg // rendezvous messages whose CTS went out
	rts     int               // rendezvous messages held (queued or matched)
	inBuf   int64             // window bytes the peer filled and not yet handed back
	owed    int64             // of those, bytes consumed (to hand back)
}

// tagQ matches one tag's messages from one peer with its Recvs, in order.
// active is the message being received into a Recv's buffer; while it is
// set, later messages wait.
type tagQ struct {
	arrived []*inMsg
	posted  []*op
	active  *inMsg
}

// inMsg is a message from a peer: eager (its bytes are in data, or going
// straight into op's buffer) or announced by an RTS.
type inMsg struct {
	tag   transport.Tag
	eager bool
	data  []byte
	size  int
	cost  int64  // eager: window bytes
	id    uint64 // rendezvous
	c     *conn  // rendezvous: the connection it came on (for the CTS)
	got   int    // bytes received so far
	op    *op    // the Recv receiving it, nil once that Recv ended
}

// Recv operation states.
const (
	opPosted = iota
	opMatched
	opDone
)

// op is a Recv. done receives exactly one value. While busy, a reader is
// reading from the socket into buf without the lock; whoever ends the op
// then sets stop and kicks that reader, which ends it. wc is the
// connection whose reader the op waits on (conn.readFor), until it ends.
type op struct {
	buf   []byte
	tag   transport.Tag
	done  chan error
	state int
	busy  bool
	stop  error
	c     *conn
	m     *inMsg
	wc    *conn
}

// sendOp is a rendezvous Send waiting for its CTS, on a reader of c.
type sendOp struct {
	key     collKey
	cts     chan uint8 // the CTS flags
	fail    chan error // abort, loss, close
	c       *conn
	waiting atomic.Bool // counted in c.waiters
}

func (s *sendOp) failWith(err error) {
	select {
	case s.fail <- err:
	default:
	}
	s.unwait(false)
}

// unwait ends the send's wait on its connection's reader, once.
func (s *sendOp) unwait(delivered bool) {
	if s.waiting.CompareAndSwap(true, false) {
		s.c.unwait(delivered)
	}
}

func (t *Transport) now() int64 { return int64(time.Since(t.epoch)) }

// goAdd runs f in a goroutine Close waits for; it returns false (and runs
// nothing) once Close has begun.
func (t *Transport) goAdd(f func()) bool {
	t.gmu.Lock()
	defer t.gmu.Unlock()
	if t.stopped {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// Rank is this endpoint's rank.
func (t *Transport) Rank() int { return t.rank }

// Size is the number of ranks in the group.
func (t *Transport) Size() int { return t.size }

func (t *Transport) wrap(peer int, what string, tag transport.Tag, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("tcp: rank %d: peer %d: %s %v: %w", t.rank, peer, what, tag, err)
}

func (t *Transport) peerOf(r int) (*peer, error) {
	if r < 0 || r >= t.size || r == t.rank {
		return nil, transport.ErrBadPeer
	}
	return t.peers[r], nil
}

func (t *Transport) eachConn(f func(*conn)) {
	for _, p := range t.peers {
		if p == nil {
			continue
		}
		for _, c := range p.conns {
			if c != nil {
				f(c)
			}
		}
	}
}

// checkLocked reports why an operation with p on tag may not start.
// p.mu is held.
func (p *peer) checkLocked(tag transport.Tag) error {
	if p.t.closed.Load() {
		return transport.ErrClosed
	}
	if a := p.t.aborted(tag); a != nil {
		return a
	}
	return p.lost
}

// arrivedLocked reports whether tag's next message from p has arrived
// whole and waits for its Recv: such a Recv succeeds even after p is
// lost. p.mu is held.
func (p *peer) arrivedLocked(tag transport.Tag) bool {
	q := p.queues[tag]
	return q != nil && q.active == nil && len(q.posted) == 0 && len(q.arrived) > 0 && q.arrived[0].eager
}

// connFor picks the connection of tag: one tag always travels on one
// connection, so its messages stay in order. A collective's steps go
// round the connections from a place its (Group, Seq) hashes to, so that
// the messages of consecutive steps (a ring's chunks in flight) spread
// evenly over them.
func (p *peer) connFor(tag transport.Tag) *conn {
	n := len(p.conns)
	if n == 1 {
		return p.conns[0]
	}
	h := tag.Group*0x9E3779B97F4A7C15 ^ tag.Seq*0xC2B2AE3D27D4EB4F
	h ^= h >> 31
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 29
	return p.conns[(h%uint64(n)+uint64(tag.Step))%uint64(n)]
}

// writeErr turns a failed write into the error the caller returns.
func (p *peer) writeErr(err error) error {
	if p.t.closed.Load() {
		return transport.ErrClosed
	}
	p.lose(fmt.Errorf("write: %w", err))
	return p.lostErr()
}

// Send delivers data to rank dst under tag.
func (t *Transport) Send(ctx context.Context, dst int, tag transport.Tag, data []byte) error {
	return t.wrap(dst, "send", tag, t.send(ctx, dst, tag, data))
}

func (t *Transport) send(ctx context.Context, dst int, tag transport.Tag, data []byte) error {
	p, err := t.peerOf(dst)
	if err != nil {
		return err
	}
	if err := transport.CtxError(ctx); err != nil {
		return err
	}
	if done, err := p.sendEager(ctx, tag, data); done {
		return err
	}
	c := p.connFor(tag)
	n := len(data)

	// Rendezvous: announce, wait for the Recv, then stream.
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return transport.CtxError(ctx)
	case <-p.gone:
		return p.lostErr()
	case <-t.done:
		return transport.ErrClosed
	}
	defer func() { <-p.slots }()
	s := &sendOp{key: keyOf(tag), cts: make(chan uint8, 1), fail: make(chan error, 1), c: c}
	// The CTS comes on c: a reader must run there until it has.
	s.waiting.Store(true)
	c.await()
	defer s.unwait(false)
	p.mu.Lock()
	if err := p.checkLocked(tag); err != nil {
		p.mu.Unlock()
		return err
	}
	p.nextID++
	id := p.nextID
	p.sends[id] = s
	p.mu.Unlock()
	// giveUp withdraws the message (if announced) and returns err.
	giveUp := func(announced bool, err error) error {
		p.mu.Lock()
		if p.sends[id] == s {
			delete(p.sends, id)
		}
		p.mu.Unlock()
		if announced {
			c.enqueue((&frame{Type: fRetract, ID: id}).bytes())
		}
		return p.sendErr(err)
	}
	rts := frame{Type: fRTS, Group: tag.Group, Seq: tag.Seq, Step: tag.Step, ID: id, Size: uint64(n)}
	if sent, err := c.write(ctx, &rts, nil); err != nil {
		return giveUp(sent, err)
	}
	var flags uint8
	select {
	case flags = <-s.cts:
	case err := <-s.fail:
		return giveUp(false, err)
	case <-ctx.Done():
		return giveUp(true, transport.CtxError(ctx))
	}
	if flags == ctsSize {
		return giveUp(false, fmt.Errorf("%w: sent %d bytes, the receiver's buffer differs", transport.ErrSizeMismatch, n))
	}
	for off := 0; off < n; {
		select {
		case err := <-s.fail:
			return giveUp(true, err)
		default:
		}
		k := min(n-off, p.chunk)
		f := frame{Type: fChunk, Len: uint32(k), ID: id, Size: uint64(off)}
		if _, err := c.write(ctx, &f, data[off:off+k]); err != nil {
			return giveUp(true, err)
		}
		off += k
	}
	return giveUp(false, nil)
}

// TrySend sends data to rank dst under tag if it can go at once, without
// waiting for the receiver: it fits EagerMax and the receiver's window has
// room. It reports whether it did; when it did not, nothing was sent and
// the caller may Send (which would wait for the Recv). With done true, err
// is what Send would have returned. An exchange (a Send and a Recv with one
// peer) can so run on one goroutine when the Send goes at once.
func (t *Transport) TrySend(ctx context.Context, dst int, tag transport.Tag, data []byte) (done bool, err error) {
	p, err := t.peerOf(dst)
	if err != nil {
		return true, t.wrap(dst, "send", tag, err)
	}
	if err := transport.CtxError(ctx); err != nil {
		return true, t.wrap(dst, "send", tag, err)
	}
	done, err = p.sendEager(ctx, tag, data)
	return done, t.wrap(dst, "send", tag, err)
}

// sendEager sends data under tag as one EAGER frame when it fits the eager
// limit and the peer's window, reporting done; otherwise (done false) it
// sends nothing, and the message must wait for its Recv.
func (p *peer) sendEager(ctx context.Context, tag transport.Tag, data []byte) (done bool, err error) {
	n := len(data)
	cost := int64(n) + msgOverhead
	p.mu.Lock()
	if err := p.checkLocked(tag); err != nil {
		p.mu.Unlock()
		return true, err
	}
	if n > p.eagerMax || p.credit < cost {
		p.mu.Unlock()
		return false, nil
	}
	p.credit -= cost
	p.mu.Unlock()
	f := frame{Type: fEager, Len: uint32(n), Group: tag.Group, Seq: tag.Seq, Step: tag.Step}
	sent, err := p.connFor(tag).write(ctx, &f, data)
	if err == nil || (sent && ctx.Err() != nil) {
		return true, nil // cut short by ctx, it arrives whole all the same
	}
	p.mu.Lock()
	p.credit += cost
	p.mu.Unlock()
	return true, p.sendErr(err)
}

// sendErr is what a Send that failed with err returns: a context's error
// as it is, a lost or closed peer's error, or, for a failed write, the
// loss it causes.
func (p *peer) sendErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, transport.ErrTimeout) || errors.Is(err, context.Canceled) ||
		errors.Is(err, transport.ErrAborted) || errors.Is(err, transport.ErrSizeMismatch) ||
		errors.Is(err, transport.ErrPeerLost) || errors.Is(err, transport.ErrClosed) {
		return err
	}
	return p.writeErr(err)
}

func (p *peer) lostErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.t.closed.Load() {
		return transport.ErrClosed
	}
	return p.lost
}

// Recv receives the message sent by rank src under tag into into.
func (t *Transport) Recv(ctx context.Context, src int, tag transport.Tag, into []byte) error {
	return t.wrap(src, "recv", tag, t.recv(ctx, src, tag, into))
}

func (t *Transport) recv(ctx context.Context, src int, tag transport.Tag, into []byte) error {
	p, err := t.peerOf(src)
	if err != nil {
		return err
	}
	if err := transport.CtxError(ctx); err != nil {
		return err
	}
	r := &op{buf: into, tag: tag, done: make(chan error, 1), state: opPosted}
	p.mu.Lock()
	if err := p.checkLocked(tag); err != nil && (err != p.lost || !p.arrivedLocked(tag)) {
		p.mu.Unlock()
		return err
	}
	q := p.queue(tag)
	q.posted = append(q.posted, r)
	p.match(tag, q)
	p.mu.Unlock()

	// The message comes on the connection its tag maps to: read it here
	// when no reader does (no hand-off from a reader goroutine), else let
	// that reader deliver it.
	if c := p.connFor(tag); len(r.done) > 0 {
		c.ensureReader() // a message this Recv matched may still stream in
	} else if !c.readFor(ctx, r) {
		// The message is often microseconds away: poll before parking
		// where processors are to spare (see internal/spin).
		spin.Until(spin.Budget(), func() bool { return len(r.done) > 0 })
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
	}
	p.mu.Lock()
	p.end(r, transport.CtxError(ctx))
	p.mu.Unlock()
	return <-r.done
}

func (p *peer) queue(tag transport.Tag) *tagQ {
	q := p.queues[tag]
	if q == nil {
		q = &tagQ{}
		p.queues[tag] = q
	}
	return q
}

// tidy drops tag's queue once it holds nothing.
func (p *peer) tidy(tag transport.Tag, q *tagQ) {
	if len(q.arrived) == 0 && len(q.posted) == 0 && q.active == nil && p.queues[tag] == q {
		delete(p.queues, tag)
	}
}

// end ends Recv r with err unless it already ended: a posted r leaves its
// queue; a matched r is detached from its message (whose remaining bytes
// are then discarded); a busy r is stopped by its reader. p.mu is held.
func (p *peer) end(r *op, err error) {
	if r.state == opDone {
		return
	}
	if r.busy {
		if r.stop == nil {
			r.stop = err
			r.c.kick()
		}
		return
	}
	if r.state == opPosted {
		if q := p.queues[r.tag]; q != nil {
			for i, x := range q.posted {
				if x == r {
					q.posted = append(q.posted[:i], q.posted[i+1:]...)
					break
				}
			}
			p.tidy(r.tag, q)
		}
	}
	if r.m != nil && r.m.op == r {
		r.m.op = nil
	}
	r.state = opDone
	if r.wc != nil {
		r.wc.unwait(err == nil)
		r.wc = nil
	}
	r.done <- err
}

// match pairs tag's arrived messages with its posted Recvs, in order.
// p.mu is held.
func (p *peer) match(tag transport.Tag, q *tagQ) {
	for q.active == nil && len(q.posted) > 0 && len(q.arrived) > 0 {
		m := q.arrived[0]
		q.arrived[0] = nil
		q.arrived = q.arrived[1:]
		r := q.posted[0]
		q.posted[0] = nil
		q.posted = q.posted[1:]
		r.state = opMatched
		if m.eager {
			p.consumed(m.cost)
			if len(r.buf) != m.size {
				p.end(r, sizeErr(m.size, len(r.buf)))
				continue
			}
			copy(r.buf, m.data)
			p.end(r, nil)
			continue
		}
		if len(r.buf) != m.size {
			p.rts--
			m.c.enqueue((&frame{Type: fCTS, Flags: ctsSize, ID: m.id}).bytes())
			p.end(r, sizeErr(m.size, len(r.buf)))
			continue
		}
		m.op = r
		r.m = m
		q.active = m
		p.matched[m.id] = m
		// Its bytes come on m.c whatever becomes of its Recv: a reader
		// must run there until they have (or the retraction has).
		m.c.waiters.Add(1)
		m.c.enqueue((&frame{Type: fCTS, ID: m.id}).bytes())
		if m.size == 0 {
			p.complete(m) // no chunk will come
		}
	}
	p.tidy(tag, q)
}

// complete ends a rendezvous message whose bytes have all arrived and
// returns its queue if that may now match more. p.mu is held.
func (p *peer) complete(m *inMsg) *tagQ {
	if r := m.op; r != nil {
		p.end(r, nil)
	}
	if p.matched[m.id] == m {
		delete(p.matched, m.id)
		p.rts--
		m.c.unwait(true)
	}
	if q := p.queues[m.tag]; q != nil && q.active == m {
		q.active = nil
		return q
	}
	return nil
}

func sizeErr(sent, recv int) error {
	return fmt.Errorf("%w: sent %d bytes, receive buffer %d", transport.ErrSizeMismatch, sent, recv)
}

// consumed hands cost bytes of the window back to the peer, in batches.
// p.mu is held.
func (p *peer) consumed(cost int64) {
	p.owed += cost
	if p.owed >= int64(p.t.cfg.MaxBuffered)/4 {
		p.flushCredit()
	}
}

// flushCredit sends the owed window bytes back. p.mu is held.
func (p *peer) flushCredit() {
	if p.owed == 0 || p.lost != nil {
		return
	}
	p.inBuf -= p.owed
	p.conns[0].enqueue((&frame{Type: fCredit, Size: uint64(p.owed)}).bytes())
	p.owed = 0
}

// failAllLocked ends every operation with p: Recvs with recvErr, Sends
// with sendErr. Eager messages that arrived whole stay receivable (what a
// peer sent before it went is delivered, as TCP delivers the bytes before
// a FIN); the rest of what is buffered is dropped. p.mu is held.
func (p *peer) failAllLocked(recvErr, sendErr error) {
	for tag, q := range p.queues {
		for _, r := range q.posted {
			p.end(r, recvErr)
		}
		if q.active != nil && q.active.op != nil {
			p.end(q.active.op, recvErr)
		}
		kept := q.arrived[:0]
		for _, m := range q.arrived {
			if m.eager {
				kept = append(kept, m)
			}
		}
		clear(q.arrived[len(kept):])
		if len(kept) == 0 {
			delete(p.queues, tag)
			continue
		}
		*q = tagQ{arrived: kept}
	}
	for id, s := range p.sends {
		s.failWith(sendErr)
		delete(p.sends, id)
	}
	for _, m := range p.matched {
		m.c.waiters.Add(-1)
	}
	clear(p.matched)
	p.rts, p.inBuf, p.owed = 0, 0, 0
}

// lose marks p lost for cause: its operations fail with ErrPeerLost and
// its connections close.
func (p *peer) lose(cause error) {
	t := p.t
	p.mu.Lock()
	if p.lost != nil {
		p.mu.Unlock()
		return
	}
	if t.closed.Load() {
		p.lost = transport.ErrClosed
	} else {
		p.lost = fmt.Errorf("%w: %w", transport.ErrPeerLost, cause)
		t.lostPeers.Add(1)
	}
	close(p.gone)
	p.failAllLocked(p.lost, p.lost)
	p.mu.Unlock()
	for _, c := range p.conns {
		if c != nil {
			c.shut()
		}
	}
}

// protocol drops p for breaking the protocol.
func (p *peer) protocol(err error) {
	p.mu.Lock()
	already := p.lost != nil
	p.mu.Unlock()
	if !already && !p.t.closed.Load() {
		p.t.protoErrs.Add(1)
	}
	p.lose(fmt.Errorf("protocol error: %w", err))
}

// aborted returns the AbortError of tag's collective, or nil.
func (t *Transport) aborted(tag transport.Tag) error {
	if a := t.aborts.Of(tag); a != nil {
		return a
	}
	return nil
}

// Abort fails the collective (tag.Group, tag.Seq) on every rank: this
// rank's operations at once, the peers' when an ABORT frame arrives.
func (t *Transport) Abort(tag transport.Tag, cause error) {
	if cause == nil {
		cause = errors.New("no cause given")
	}
	if t.closed.Load() {
		return
	}
	now := time.Now().UnixNano()
	a := &transport.AbortError{Origin: t.rank, Group: tag.Group, Seq: tag.Seq, Cause: cause}
	if !t.aborts.Record(a, now, true) {
		return
	}
	t.sweep(keyOf(tag), a)
	text := cause.Error()
	if len(text) > maxAbortText {
		text = text[:maxAbortText]
	}
	f := frame{Type: fAbort, Len: uint32(len(text)), Group: tag.Group, Seq: tag.Seq,
		Origin: uint32(t.rank), ID: uint64(now), Size: uint64(transport.CodeOf(cause))}
	b := append(f.bytes(), text...)
	// On every connection: a peer may be reading only the one its Recv's
	// message comes on (conn.readFor). The peer keeps the first copy.
	t.eachConn(func(c *conn) { c.enqueue(b) })
}

// remoteAbort applies an ABORT frame from p.
func (t *Transport) remoteAbort(p *peer, f *frame, text []byte) {
	a := &transport.AbortError{Origin: p.rank, Group: f.Group, Seq: f.Seq,
		Cause: transport.RemoteCause(transport.CauseCode(f.Size), string(text))}
	if t.aborts.Record(a, int64(f.ID), false) {
		t.sweep(collKey{f.Group, f.Seq}, a)
	}
}

// sweep fails every operation of collective k with a, on every peer.
func (t *Transport) sweep(k collKey, a error) {
	for _, p := range t.peers {
		if p == nil {
			continue
		}
		p.mu.Lock()
		for tag, q := range p.queues {
			if keyOf(tag) != k {
				continue
			}
			for _, r := range q.posted {
				p.end(r, a)
			}
			for _, m := range q.arrived {
				if m.eager {
					p.consumed(m.cost)
				} else {
					p.rts--
				}
			}
			if q.active != nil && q.active.op != nil {
				p.end(q.active.op, a)
			}
			// An active message stays in matched (or the reader) until
			// its last bytes or its retraction arrive.
			delete(p.queues, tag)
		}
		for id, s := range p.sends {
			if s.key == k {
				s.failWith(a)
				delete(p.sends, id)
			}
		}
		p.mu.Unlock()
	}
}

// Close shuts this endpoint down: its operations fail with ErrClosed, its
// connections close (so the peers' fail with ErrPeerLost), and it returns
// once every goroutine it started has ended. Close is idempotent.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		close(t.done)
		t.gmu.Lock()
		t.stopped = true
		if t.timer != nil {
			t.timer.Stop()
		}
		t.gmu.Unlock()
		for _, p := range t.peers {
			if p == nil {
				continue
			}
			p.mu.Lock()
			if p.lost == nil {
				p.lost = transport.ErrClosed
				close(p.gone)
			}
			p.failAllLocked(transport.ErrClosed, transport.ErrClosed)
			p.mu.Unlock()
			for _, c := range p.conns {
				if c != nil {
					c.shut()
				}
			}
		}
		t.wg.Wait()
	})
	return nil
}

// tick is the heartbeat: it drops silent peers, pings idle connections,
// hands back owed window bytes and lets an idle transport's connections be
// read now and then (pings, aborts, a peer's close).
func (t *Transport) tick() {
	t.gmu.Lock()
	if t.stopped {
		t.gmu.Unlock()
		return
	}
	t.wg.Add(1)
	t.gmu.Unlock()
	defer t.wg.Done()

	now := t.now()
	hb := int64(t.cfg.HeartbeatInterval)
	// A tick that comes late means this process itself was stalled (CPU
	// starvation, a stopped process, a suspended machine): its readers
	// may not have read what its peers sent, so silence proves nothing
	// this time.
	judge := now-t.lastTick.Swap(now) <= 2*hb
	for _, p := range t.peers {
		if p == nil {
			continue
		}
		p.mu.Lock()
		lost := p.lost != nil
		if !lost {
			p.flushCredit()
		}
		p.mu.Unlock()
		if lost {
			continue
		}
		for _, c := range p.conns {
			if silent := now - c.lastRead.Load(); judge && silent > int64(t.cfg.PeerTimeout) {
				p.lose(fmt.Errorf("silent for %v (timeout %v)", time.Duration(silent).Round(time.Millisecond), t.cfg.PeerTimeout))
				break
			}
			if now-c.lastWrite.Load() >= hb/2 {
				c.ping()
			}
			c.drain()
		}
	}
	t.gmu.Lock()
	if !t.stopped {
		t.timer.Reset(t.cfg.HeartbeatInterval)
	}
	t.gmu.Unlock()
}
