package msg

import (
	"context"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// awaitAnswer waits for the answer to message id, announced by Send s.
// When the Send fails first it gives the message up (abandon) and returns
// the error Send returns.
func (p *Peer) awaitAnswer(ctx context.Context, s *sendOp, id uint64) (Answer, error) {
	ready := func() bool { return len(s.answer) > 0 || len(s.fail) > 0 }
	var w waiter
	for {
		if ctx.Err() == nil && !ready() {
			w.wait(ctx, p, s.lane, &s.waiting, ready)
		}
		// An answer that came before a failure is the answer.
		select {
		case a := <-s.answer:
			s.release(p, true)
			return a, nil
		default:
		}
		select {
		case err := <-s.fail:
			return 0, p.abandon(s, id, err)
		default:
		}
		if ctx.Err() != nil {
			return 0, p.abandon(s, id, transport.CtxError(ctx))
		}
	}
}

// abandon ends Send s of message id, which failed with err before its
// answer came: a message offered by address is withdrawn; any other is
// retracted, unless the peer is gone.
func (p *Peer) abandon(s *sendOp, id uint64, err error) error {
	p.mu.Lock()
	offered := s.offered
	p.mu.Unlock()
	if offered && !p.down.Load() {
		return p.withdraw(s, id, err)
	}
	return p.giveUp(s, id, true, err)
}

// withdraw retracts message id, offered by address, after its Send ended
// with err, and waits until the receiver answers (then nothing reads the
// buffer any more) or the peer is lost.
func (p *Peer) withdraw(s *sendOp, id uint64, err error) error {
	p.mu.Lock()
	if p.lost == nil {
		p.sends[id] = s // an abort's sweep may have dropped it
	}
	p.mu.Unlock()
	p.link.Retract(s.tag, id, true)
	ready := func() bool { return len(s.answer) > 0 || p.down.Load() }
	var w waiter
	for {
		if !ready() {
			w.wait(context.Background(), p, s.lane, &s.waiting, ready)
		}
		select {
		case <-s.answer:
			s.release(p, true)
			return p.giveUp(s, id, false, err)
		case <-p.gone:
			return p.giveUp(s, id, false, p.lostErr())
		default:
		}
	}
}
