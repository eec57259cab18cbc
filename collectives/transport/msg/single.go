package msg

import (
	"errors"
	"fmt"
)

// singlePiece is the most bytes one SingleCopy.ReadAt reads: between
// pieces a read looks whether its Recv was ended (errHalted).
const singlePiece = 4 << 20

var errHalted = errors.New("read halted")

// readSingle reads message m into Recv r's buffer from the sender's
// memory, on r's goroutine, and ends both: r with nil once every byte is
// read, or with what ended it meanwhile. The sender is answered Done in
// any case; a read that fails loses the peer.
func (p *Peer) readSingle(r *op, m *inMsg) {
	p.mu.Lock()
	run := r.stop == nil && p.lost == nil
	p.mu.Unlock()
	var err error
	if run {
		err = p.readAll(r, m)
	}
	if err != nil && err != errHalted {
		p.Lose(fmt.Errorf("reading its message of %d bytes by address: %w", m.size, err))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r.busy = false
	if p.lost == nil {
		p.link.Answer(m.lane, m.id, Done)
	}
	switch {
	case r.stop != nil:
		stop := r.stop
		r.stop = nil
		p.end(r, stop)
	case err != nil || !run:
		if p.lost != nil {
			err = p.lost
		}
		p.end(r, err)
	default:
		p.e.singleCopies.Add(1)
	}
	m.got = m.size
	if q := p.complete(m); q != nil {
		p.match(m.tag, q)
	}
}

func (p *Peer) readAll(r *op, m *inMsg) error {
	buf := r.buf[:m.size]
	for off := 0; off < len(buf); {
		if r.halt.Load() || p.down.Load() {
			return errHalted
		}
		k := min(len(buf)-off, singlePiece)
		if err := p.sc.ReadAt(buf[off:off+k], m.addr, off); err != nil {
			return err
		}
		off += k
	}
	return nil
}
