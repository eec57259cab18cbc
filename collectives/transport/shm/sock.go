package shm

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// aLongTimeAgo is a deadline that wakes a blocked socket call at once.
var aLongTimeAgo = time.Unix(1, 0)

// sock is a pair's socket once the handshake is done: the frames that
// must not wait for ring space (see frame.go), and the peer's liveness
// (its end closes when its process ends).
//
// Writes never block their caller: a frame goes out at once when nothing
// is queued and the socket has room, else it is queued for a flush
// goroutine. A failed write stops the writing side only: the reader
// reports the peer's end (the writer may hold the Peer's lock).
type sock struct {
	l  *link // its goroutines are the link's
	nc *net.UnixConn
	rc syscall.RawConn

	lastWrite atomic.Int64 // Unix ns

	mu       sync.Mutex
	q        [][]byte
	flushing bool
	dead     bool
}

func newSock(l *link, nc *net.UnixConn) (*sock, error) {
	rc, err := nc.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &sock{l: l, nc: nc, rc: rc}, nil
}

func (s *sock) send(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	if !s.flushing && len(s.q) == 0 {
		sent, err := s.try(b)
		if err != nil {
			s.breakLocked()
			return
		}
		if sent {
			s.lastWrite.Store(time.Now().UnixNano())
			return
		}
	}
	s.q = append(s.q, b)
	if !s.flushing && s.l.goAdd(s.flush) {
		s.flushing = true
	}
}

func (s *sock) try(b []byte) (sent bool, err error) {
	var werr error
	cerr := s.rc.Write(func(fd uintptr) bool {
		_, werr = unix.Write(int(fd), b)
		return true
	})
	if cerr != nil {
		return false, cerr
	}
	if werr == unix.EAGAIN || werr == unix.EWOULDBLOCK || werr == unix.EINTR {
		return false, nil
	}
	return werr == nil, werr
}

func (s *sock) flush() {
	for {
		s.mu.Lock()
		if s.dead || len(s.q) == 0 {
			s.flushing = false
			s.mu.Unlock()
			return
		}
		b := s.q[0]
		s.q[0] = nil
		s.q = s.q[1:]
		s.mu.Unlock()
		if _, err := s.nc.Write(b); err != nil {
			s.mu.Lock()
			s.flushing = false
			s.breakLocked()
			s.mu.Unlock()
			return
		}
		s.lastWrite.Store(time.Now().UnixNano())
	}
}

// breakLocked stops writing after a failed write; the socket stays open
// for reading, so the peer's end is seen as an end. s.mu is held.
func (s *sock) breakLocked() {
	s.dead = true
	s.q = nil
	_ = s.nc.CloseWrite()
}

// poll reads one frame into buf if one is there, without waiting: n < 0
// means none; n == 0 with a nil error means the peer's end closed. A read
// deadline that passed fails it with os.ErrDeadlineExceeded.
func (s *sock) poll(buf []byte) (int, error) {
	n := -1
	var rerr error
	err := s.rc.Read(func(fd uintptr) bool {
		n, _, _, _, rerr = unix.Recvmsg(int(fd), buf, nil, unix.MSG_DONTWAIT)
		return true
	})
	if err != nil {
		return -1, err
	}
	switch {
	case rerr == unix.EAGAIN || rerr == unix.EWOULDBLOCK || rerr == unix.EINTR:
		return -1, nil
	case isReset(rerr):
		return 0, nil
	case rerr != nil:
		return -1, rerr
	}
	return n, nil
}

func (s *sock) readable() bool {
	var one [1]byte
	n := -1
	_ = s.rc.Read(func(fd uintptr) bool {
		n, _, _, _, _ = unix.Recvmsg(int(fd), one[:], nil, unix.MSG_DONTWAIT|unix.MSG_PEEK)
		return true
	})
	return n >= 0
}

// wait reads one frame into buf, waiting for it (or for the read
// deadline); n == 0 with a nil error means the peer's end closed.
func (s *sock) wait(buf []byte) (int, error) {
	n, err := s.nc.Read(buf)
	if n == 0 && err != nil && (errors.Is(err, io.EOF) || isReset(err)) {
		return 0, nil
	}
	return n, err
}

// isReset reports whether a read failed because the peer closed its end
// with frames of ours unread: an end like any other.
func isReset(err error) bool {
	return errors.Is(err, unix.ECONNRESET)
}

func readError(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("socket closed: %w", err)
	}
	return fmt.Errorf("socket read: %w", err)
}

func (s *sock) shut() {
	s.mu.Lock()
	s.dead = true
	s.q = nil
	s.mu.Unlock()
	_ = s.nc.Close()
}
