package remoting

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/internal/awake"
	"go.uber.org/zap"
)

// The record layer's framing: a 4-byte big-endian length, then that many
// bytes of AES-256-GCM output (the plaintext, at most recMaxPlain bytes,
// and its 16-byte tag), the length being the tag's additional data. Each
// direction has its own key; the nonce is 4 zero bytes and the record's
// 8-byte big-endian counter in that direction. An empty record is a
// heartbeat.
const (
	recordKey    = 32 // AES-256
	recHeader    = 4
	recTag       = 16
	recMaxPlain  = 64 << 10
	recMaxSealed = recMaxPlain + recTag
	recNonce     = 12
	// watchesPerTimeout: the watchdog runs, and an idle side sends a
	// heartbeat, this many times per peer timeout, so a peer's silence
	// before it pauses is a twentieth of the timeout, and a pause of up
	// to most of the timeout is survived.
	watchesPerTimeout = 20
)

// errRecord is a record that is too long, too short or fails to open: the
// connection is closed.
var errRecord = errors.New("remoting: bad record")

// epoch anchors the record layer's monotonic clock.
var epoch = time.Now()

// mono is the time since epoch on the monotonic clock.
func mono() time.Duration { return time.Since(epoch) }

// recordConn is an authenticated control connection: what it reads was
// sealed by the peer that proved the group's secret in this connection's
// handshake, in order, unaltered (a record over the maximum size, or one
// that fails to open, closes the connection); what it writes is sealed
// the same way. It is safe for one reader and one writer at a time (as
// net.Conn: reads and writes are each serialised).
//
// Liveness: it writes a heartbeat record when it has written nothing for
// a twentieth of the peer timeout, and closes the connection when its
// reader has read no record for the whole peer timeout (so its user must
// keep reading, as gRPC's transport does) (a paused, starved or vanished
// peer; a peer that closes is seen at once by its reader). A stall of
// this process itself (its watchdog woken late) gives the peer a fresh
// timeout, so a process resuming from a pause does not take its peers'
// records still in flight for silence. Close ends both goroutines.
type recordConn struct {
	raw     net.Conn
	log     *zap.Logger
	timeout time.Duration

	rmu     sync.Mutex
	br      *bufio.Reader
	open    cipher.AEAD
	rctr    uint64
	rnonce  [recNonce]byte
	plain   []byte // the last record's plaintext buffer
	pending []byte // what of it Read has not returned yet
	rerr    error  // sticky

	wmu    sync.Mutex
	seal   cipher.AEAD
	wctr   uint64
	wnonce [recNonce]byte
	wbuf   []byte
	werr   error // sticky

	lastRead, lastWrite atomic.Int64 // mono() at the last record
	beat                chan struct{}
	done                chan struct{}
	closeOnce           sync.Once
}

// newRecordConn starts the record layer on raw with the two directions'
// keys; peerTimeout > 0 is the silence bound.
func newRecordConn(raw net.Conn, sendKey, recvKey []byte, peerTimeout time.Duration, log *zap.Logger) (*recordConn, error) {
	seal, err := gcm(sendKey)
	if err != nil {
		return nil, err
	}
	open, err := gcm(recvKey)
	if err != nil {
		return nil, err
	}
	c := &recordConn{
		raw: raw, log: log, timeout: peerTimeout,
		br: bufio.NewReaderSize(raw, recHeader+recMaxSealed), open: open, plain: make([]byte, 0, recMaxPlain),
		seal: seal, wbuf: make([]byte, 0, recHeader+recMaxSealed),
		beat: make(chan struct{}, 1), done: make(chan struct{}),
	}
	now := int64(mono())
	c.lastRead.Store(now)
	c.lastWrite.Store(now)
	go c.watch(max(peerTimeout/watchesPerTimeout, time.Millisecond))
	go c.beats()
	return c, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("remoting: record cipher: %w", err)
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		return nil, fmt.Errorf("remoting: record cipher: %w", err)
	}
	return a, nil
}

// Read returns plaintext from the peer's records, skipping heartbeats.
func (c *recordConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for len(c.pending) == 0 {
		if c.rerr != nil {
			return 0, c.rerr
		}
		if err := c.readRecord(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return 0, err // a deadline: the record is still buffered whole or in part
			}
			c.rerr = err
			if errors.Is(err, errRecord) {
				c.log.Warn("remote: closed a control connection: bad record", zap.Error(err))
				_ = c.Close()
			}
			return 0, err
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// readRecord opens the next record into pending.
func (c *recordConn) readRecord() error {
	h, err := c.br.Peek(recHeader)
	if err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(h))
	if n < recTag || n > recMaxSealed {
		return fmt.Errorf("%w: %d sealed bytes, want %d to %d", errRecord, n, recTag, recMaxSealed)
	}
	rec, err := c.br.Peek(recHeader + n)
	if err != nil {
		return err
	}
	if c.rctr == math.MaxUint64 {
		return fmt.Errorf("%w: counter exhausted", errRecord)
	}
	binary.BigEndian.PutUint64(c.rnonce[recNonce-8:], c.rctr)
	plain, err := c.open.Open(c.plain[:0], c.rnonce[:], rec[recHeader:], rec[:recHeader])
	if err != nil {
		return fmt.Errorf("%w: record %d does not open", errRecord, c.rctr)
	}
	_, _ = c.br.Discard(recHeader + n)
	c.rctr++
	c.lastRead.Store(int64(mono()))
	c.pending = plain
	return nil
}

// Write seals p into records of at most recMaxPlain bytes each.
func (c *recordConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := 0
	for len(p) > 0 && c.werr == nil {
		k := min(len(p), recMaxPlain)
		if err := c.writeRecord(p[:k]); err != nil {
			c.werr = err
			_ = c.Close() // cut mid-record: nothing more can follow
			break
		}
		n += k
		p = p[k:]
	}
	return n, c.werr
}

// writeRecord seals and writes one record; the caller holds wmu. A failed
// write leaves the stream cut mid-record, so the caller makes it sticky.
func (c *recordConn) writeRecord(plain []byte) error {
	if c.wctr == math.MaxUint64 {
		return fmt.Errorf("%w: counter exhausted", errRecord)
	}
	var hdr [recHeader]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(plain)+recTag))
	binary.BigEndian.PutUint64(c.wnonce[recNonce-8:], c.wctr)
	out := append(c.wbuf[:0], hdr[:]...)
	out = c.seal.Seal(out, c.wnonce[:], plain, hdr[:])
	c.wctr++
	if _, err := c.raw.Write(out); err != nil {
		return err
	}
	c.lastWrite.Store(int64(mono()))
	return nil
}

// watch closes the connection after a silence of the peer timeout, and
// asks for a heartbeat when this side has been quiet; it runs every
// twentieth of the timeout until Close.
func (c *recordConn) watch(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	alive := awake.New(int64(every), int64(mono()))
	var silence awake.Silence
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		now := mono()
		// A tick that comes late means this process itself was stalled
		// (starved, stopped, suspended): its reader may not have read what
		// the peer sent meanwhile, so that interval counts nothing.
		if quiet := time.Duration(silence.Count(alive.Tick(int64(now)), c.lastRead.Load())); quiet > c.timeout {
			c.log.Info("remote: closed a silent control connection", zap.Duration("silent", quiet), zap.Duration("peer_timeout", c.timeout))
			_ = c.Close()
			return
		}
		if now-time.Duration(c.lastWrite.Load()) >= every/2 {
			select {
			case c.beat <- struct{}{}:
			default:
			}
		}
	}
}

// beats writes the heartbeats watch asks for (a write blocked on a peer
// that does not read holds it until Close).
func (c *recordConn) beats() {
	for {
		select {
		case <-c.done:
			return
		case <-c.beat:
		}
		c.wmu.Lock()
		if c.werr == nil {
			if err := c.writeRecord(nil); err != nil {
				c.werr = err
				_ = c.Close()
			}
		}
		c.wmu.Unlock()
	}
}

// Close closes the raw connection and ends the goroutines.
func (c *recordConn) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		close(c.done)
		err = c.raw.Close()
	})
	return err
}

// LocalAddr implements net.Conn.
func (c *recordConn) LocalAddr() net.Addr { return c.raw.LocalAddr() }

// RemoteAddr implements net.Conn.
func (c *recordConn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

// SetDeadline implements net.Conn.
func (c *recordConn) SetDeadline(t time.Time) error { return c.raw.SetDeadline(t) }

// SetReadDeadline implements net.Conn.
func (c *recordConn) SetReadDeadline(t time.Time) error { return c.raw.SetReadDeadline(t) }

// SetWriteDeadline implements net.Conn.
func (c *recordConn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }
