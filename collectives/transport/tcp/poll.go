package tcp

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// Polling. An operation that reads its connection itself (conn.readUntil)
// first polls the socket with reads that do not wait, for the Endpoint's
// budget (Peer.Poll), before it blocks in the netpoller: a message that
// arrives meanwhile needs no wake-up of a parked thread, which on small
// messages is most of their latency.

// errWouldBlock is a read that does not wait finding nothing to read.
var errWouldBlock = errors.New("tcp: read would block")

// rawOp is one system call on a raw descriptor: its buffer and result.
type rawOp struct {
	b   []byte
	n   int
	err error
}

func (o *rawOp) read(fd uintptr) bool {
	o.n, o.err = syscall.Read(int(fd), o.b)
	return true
}

func (o *rawOp) write(fd uintptr) bool {
	o.n, o.err = syscall.Write(int(fd), o.b)
	return true
}

// read reads c's socket into b: at once (errWouldBlock when nothing is
// there) while c.nowait is set, else waiting in the netpoller.
func (c *conn) read(b []byte) (int, error) {
	if !c.nowait || c.rc == nil {
		return c.nc.Read(b)
	}
	c.pr.b = b
	cerr := c.rc.Read(c.prf)
	n, err := c.pr.n, c.pr.err
	c.pr = rawOp{}
	switch {
	case cerr != nil: // a deadline (a kick), a closed connection
		return 0, cerr
	case err == syscall.EAGAIN || err == syscall.EINTR:
		return 0, errWouldBlock
	case err != nil:
		return 0, os.NewSyscallError("read", err)
	case n == 0 && len(b) > 0:
		return 0, io.EOF
	}
	return n, nil
}

// tryWrite writes what of b the socket takes at once (an error is left to
// the ordinary write that follows). The caller holds wsem.
func (c *conn) tryWrite(b []byte) int {
	if c.rc == nil {
		return 0
	}
	c.pw.b = b
	_ = c.rc.Write(c.pwf)
	n, err := c.pw.n, c.pw.err
	c.pw = rawOp{}
	if err != nil || n < 0 {
		return 0
	}
	return n
}
