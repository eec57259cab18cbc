package gate

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// Peek fills b with the first bytes waiting on c without reading them
// (they stay for the handshake to read), waiting until len(b) bytes are
// in, the dialer closes, more returns false for what is in so far (a
// prefix that cannot start a valid message), or the deadline passes (a
// zero deadline: no wait). It returns how many bytes it saw; c's read
// deadline is left at deadline. A connection that is not a socket sees 0.
func Peek(c net.Conn, b []byte, deadline time.Time, more func(in []byte) bool) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	wait := !deadline.IsZero() && time.Now().Before(deadline)
	if wait {
		_ = c.SetReadDeadline(deadline)
	}
	n := 0
	_ = rc.Read(func(fd uintptr) bool {
		m, _, err := syscall.Recvfrom(int(fd), b, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR):
			return !wait // nothing yet: wait for bytes, or the deadline
		case err != nil || m <= 0:
			return true
		}
		n = m
		return n == len(b) || !wait || (more != nil && !more(b[:n]))
	})
	return n
}
