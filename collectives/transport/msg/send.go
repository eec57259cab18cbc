package msg

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// sendOp is a rendezvous Send waiting for its answer on lane, which it
// Holds until release.
type sendOp struct {
	tag     transport.Tag
	lane    int
	answer  chan Answer
	fail    chan error // abort, loss, close
	offered bool       // the link offered data by address: kept until answered (under p.mu)
	held    atomic.Bool
	waiting atomic.Bool // in the link's Wait
}

// failWith fails s with err, once. p.mu is held.
func (s *sendOp) failWith(p *Peer, err error) {
	select {
	case s.fail <- err:
	default:
	}
	if s.waiting.Load() {
		p.link.Wake(s.lane)
	}
}

func (s *sendOp) release(p *Peer, delivered bool) {
	if s.held.CompareAndSwap(true, false) {
		p.link.Release(s.lane, delivered)
	}
}

func (e *Endpoint) Send(ctx context.Context, dst int, tag transport.Tag, data []byte) error {
	return e.wrap(dst, "send", tag, e.send(ctx, dst, tag, data))
}

func (e *Endpoint) send(ctx context.Context, dst int, tag transport.Tag, data []byte) error {
	p, err := e.peerOf(ctx, dst)
	if err != nil {
		return err
	}
	if done, err := p.sendEager(ctx, tag, data, true); done {
		return err
	}
	return p.sendRendezvous(ctx, tag, data)
}

// TrySend sends data to rank dst under tag if it can go at once (it fits
// the link's EagerMax, the receiver's window and the link's room), else
// sends nothing and reports false (see transport.TrySender).
func (e *Endpoint) TrySend(ctx context.Context, dst int, tag transport.Tag, data []byte) (done bool, err error) {
	p, err := e.peerOf(ctx, dst)
	if err != nil {
		return true, e.wrap(dst, "send", tag, err)
	}
	done, err = p.sendEager(ctx, tag, data, false)
	return done, e.wrap(dst, "send", tag, err)
}

// sendEager sends data whole through the link when it fits the eager
// limit and the peer's window (done), else nothing.
func (p *Peer) sendEager(ctx context.Context, tag transport.Tag, data []byte, wait bool) (done bool, err error) {
	if len(data) > p.lim.EagerMax {
		return false, nil
	}
	p.mu.Lock()
	err = p.checkLocked(tag)
	p.mu.Unlock()
	if err != nil {
		return true, err
	}
	done, err = p.link.Eager(ctx, tag, data, wait)
	if !done {
		return false, nil
	}
	return true, p.sendErr(err)
}

// sendRendezvous announces data, waits for the answer, then sends it in
// chunks (unless the receiver read it by address).
func (p *Peer) sendRendezvous(ctx context.Context, tag transport.Tag, data []byte) error {
	if err := p.turn(ctx); err != nil {
		return err
	}
	defer func() { <-p.turns }()
	defer runtime.KeepAlive(data) // the peer may read it by address until then
	s := &sendOp{tag: tag, lane: p.link.LaneOf(tag), answer: make(chan Answer, 1), fail: make(chan error, 1)}
	s.held.Store(true)
	p.link.Hold(s.lane)
	id, err := p.register(s)
	if err != nil {
		s.release(p, false)
		return err
	}
	sent, offered, err := p.link.Announce(ctx, tag, id, data)
	if err != nil {
		return p.giveUp(s, id, sent, err)
	}
	if offered {
		p.mu.Lock()
		s.offered = true
		p.mu.Unlock()
	}
	a, err := p.awaitAnswer(ctx, s, id)
	if err != nil {
		return err
	}
	switch a {
	case Done:
		if !offered {
			p.Protocol(fmt.Errorf("message %d answered Done, never offered by address", id))
			return p.giveUp(s, id, false, p.lostErr())
		}
		return p.giveUp(s, id, false, nil)
	case SizeMismatch:
		return p.giveUp(s, id, false, fmt.Errorf("%w: sent %d bytes, the receiver's buffer differs",
			transport.ErrSizeMismatch, len(data)))
	}
	return p.stream(ctx, s, id, data)
}

// turn waits for a turn among the rendezvous sends in flight toward p.
func (p *Peer) turn(ctx context.Context) error {
	select {
	case p.turns <- struct{}{}:
		return nil
	default:
	}
	select {
	case p.turns <- struct{}{}:
		return nil
	case <-ctx.Done():
		return transport.CtxError(ctx)
	case <-p.gone:
		return p.lostErr()
	}
}

func (p *Peer) register(s *sendOp) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkLocked(s.tag); err != nil {
		return 0, err
	}
	p.nextID++
	p.sends[p.nextID] = s
	return p.nextID, nil
}

// giveUp forgets send s of message id, retracts the message if asked,
// and returns err as Send returns it.
func (p *Peer) giveUp(s *sendOp, id uint64, retract bool, err error) error {
	p.mu.Lock()
	if p.sends[id] == s {
		delete(p.sends, id)
	}
	p.mu.Unlock()
	s.release(p, false)
	if retract && !p.down.Load() {
		p.link.Retract(s.tag, id, false)
	}
	return p.sendErr(err)
}

func (p *Peer) stream(ctx context.Context, s *sendOp, id uint64, data []byte) error {
	n := len(data)
	for off := 0; off < n; {
		select {
		case err := <-s.fail:
			return p.giveUp(s, id, true, err)
		default:
		}
		k := min(n-off, p.lim.Chunk)
		if _, err := p.link.Chunk(ctx, s.tag, id, off, data[off:off+k]); err != nil {
			return p.giveUp(s, id, true, err)
		}
		off += k
	}
	return p.giveUp(s, id, false, nil)
}
