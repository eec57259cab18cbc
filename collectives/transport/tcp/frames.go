package tcp

import (
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// protoError marks a read error as the peer breaking the protocol.
type protoError struct{ err error }

func (e protoError) Error() string { return e.err.Error() }
func (e protoError) Unwrap() error { return e.err }

// step reads once from the socket and processes what it read.
func (c *conn) step() error {
	if c.rpos == c.rend && c.left > 0 && c.sink != nil {
		return c.readPayload()
	}
	if c.rpos == c.rend {
		n, err := c.read(c.rbuf)
		if n > 0 {
			c.touch(n)
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

// readPayload reads the rest of the current payload from the socket
// straight where its Sink says, or into the read buffer to drop it.
func (c *conn) readPayload() error {
	dst := c.sink.Take(c.left)
	if len(dst) == 0 {
		dst = c.rbuf[:min(c.left, len(c.rbuf))]
	}
	n, err := c.read(dst)
	if n > 0 {
		c.touch(n)
	}
	c.sink.Put(n)
	c.left -= n
	if c.left == 0 {
		if e := c.finish(); e != nil {
			return e
		}
	}
	return err
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
			f, err := decodeFrame(c.hdr[:], c.l.cfg.MaxFrame)
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
	switch {
	case c.sink != nil:
		c.sink.Copy(b)
	case c.text != nil:
		c.toff += copy(c.text[c.toff:], b)
	}
}

// begin acts on a frame header and sets up where its payload goes.
func (c *conn) begin(f *frame) error {
	c.cur = *f
	c.left = int(f.Len)
	c.sink, c.text, c.toff = nil, nil, 0
	if f.Len > 0 {
		c.bulk = f.Len >= readBuf/2
	}
	if err := c.dispatch(f); err != nil {
		return protoError{err}
	}
	if c.left == 0 {
		return c.finish()
	}
	return nil
}

// dispatch hands frame f to the link's Peer (to no one once the link is
// down).
func (c *conn) dispatch(f *frame) error {
	l := c.l
	select {
	case <-l.down:
		return nil
	default:
	}
	p := l.peer
	tag := transport.Tag{Group: f.Group, Seq: f.Seq, Step: f.Step}
	var err error
	switch f.Type {
	case fEager:
		c.sink, err = p.Eager(tag, int(f.Len))
	case fRTS:
		err = p.Announced(c.idx, tag, f.ID, f.Size, 0)
	case fCTS:
		p.Answered(f.ID, msg.Answer(f.Flags))
	case fChunk:
		c.sink, err = p.Chunk(f.ID, f.Size, int(f.Len))
	case fRetract:
		err = p.Retracted(f.ID, f.Flags == retractAck)
	case fCredit:
		err = l.credited(f.Size)
	case fAbort:
		if f.Origin != uint32(l.rank) {
			return fmt.Errorf("abort from rank %d on rank %d's connection", f.Origin, l.rank)
		}
		c.text = make([]byte, f.Len)
	}
	return err
}

// finish acts on a frame whose payload has arrived.
func (c *conn) finish() error {
	f := &c.cur
	var err error
	switch {
	case c.sink != nil:
		err = c.sink.Done()
	case f.Type == fAbort && c.text != nil:
		c.l.peer.Aborted(f.Group, f.Seq, int64(f.ID), transport.CauseCode(f.Size), string(c.text))
	}
	c.sink, c.text = nil, nil
	if err != nil {
		return protoError{err}
	}
	return nil
}
