package msg

import (
	"context"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

func (e *Endpoint) Recv(ctx context.Context, src int, tag transport.Tag, into []byte) error {
	return e.wrap(src, "recv", tag, e.recv(ctx, src, tag, into))
}

func (e *Endpoint) recv(ctx context.Context, src int, tag transport.Tag, into []byte) error {
	p, err := e.peerOf(ctx, src)
	if err != nil {
		return err
	}
	r := getOp(into, tag, p.link.LaneOf(tag))
	p.mu.Lock()
	if err := p.checkLocked(tag); err != nil && (err != p.lost || !p.arrivedLocked(tag)) {
		p.mu.Unlock()
		putOp(r)
		return err
	}
	q := p.queue(tag)
	q.posted = append(q.posted, r)
	p.match(tag, q)
	p.mu.Unlock()
	err = p.await(ctx, r)
	putOp(r)
	return err
}

// await waits for Recv r's end in the link's Wait (which may read the
// message on this goroutine), reads a message offered by address itself,
// and ends r when ctx ends.
func (p *Peer) await(ctx context.Context, r *op) error {
	ready := r.ready
	var w waiter
	for ctx.Err() == nil {
		if !ready() {
			w.wait(ctx, p, r.lane, &r.waiting, ready)
		}
		select {
		case err := <-r.done:
			return err
		case m := <-r.job:
			p.readSingle(r, m)
		default:
		}
	}
	p.mu.Lock()
	p.end(r, transport.CtxError(ctx))
	p.mu.Unlock()
	// r ended, or ends once its busy side is done.
	for {
		select {
		case err := <-r.done:
			return err
		case m := <-r.job:
			p.readSingle(r, m)
		}
	}
}
