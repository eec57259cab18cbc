package transport

import (
	"context"
	"fmt"
	"sync"

	"github.com/choreo-gpu/choreo/internal/spin"
)

// hub connects the ranks of one in-process group. Send and Recv meet at the
// hub (a rendezvous): whichever side arrives second copies the bytes straight
// from the sender's slice into the receiver's, once, with no intermediate
// buffer, and outside the hub's lock. The hub starts no goroutines.
type hub struct {
	n int

	mu      sync.Mutex
	closed  []bool
	queues  map[matchKey]*queue
	aborted Aborts
	retired []Retired // by rank: the groups each rank retired
	windows map[Tag]*window
}

// matchKey names one stream of messages.
type matchKey struct {
	src, dst int
	tag      Tag
}

// collKey names one collective, the unit Abort acts on.
type collKey struct{ group, seq uint64 }

func keyOf(t Tag) collKey { return collKey{t.Group, t.Seq} }

// queue holds the unmatched operations of one matchKey; at most one of the
// two lists is non-empty.
type queue struct {
	sends, recvs []*pending
}

// pending is a posted Send or Recv waiting for its partner. done receives
// exactly one value, from whoever completes or fails it.
type pending struct {
	buf  []byte
	done chan error
}

// NewLocal returns the endpoints of a new in-process group of n ranks
// (n >= 1), indexed by rank. Each implements Transport, PeerAccess and
// Retirer.
func NewLocal(n int) []Transport {
	h := &hub{n: max(n, 1), queues: make(map[matchKey]*queue), windows: make(map[Tag]*window)}
	h.closed = make([]bool, h.n)
	h.retired = make([]Retired, h.n)
	ts := make([]Transport, h.n)
	for i := range ts {
		ts[i] = &local{hub: h, rank: i}
	}
	return ts
}

// local is one rank's endpoint on a hub.
type local struct {
	hub  *hub
	rank int
}

var (
	_ Transport  = (*local)(nil)
	_ PeerAccess = (*local)(nil)
	_ Retirer    = (*local)(nil)
)

func (l *local) Rank() int { return l.rank }
func (l *local) Size() int { return l.hub.n }

func (l *local) Send(ctx context.Context, dst int, tag Tag, data []byte) error {
	return l.xfer(ctx, true, dst, tag, data)
}

func (l *local) Recv(ctx context.Context, src int, tag Tag, into []byte) error {
	return l.xfer(ctx, false, src, tag, into)
}

func (l *local) xfer(ctx context.Context, send bool, peer int, tag Tag, buf []byte) (err error) {
	defer func() {
		if err != nil {
			what := "recv from"
			if send {
				what = "send to"
			}
			err = fmt.Errorf("transport: rank %d: %s %d %v: %w", l.rank, what, peer, tag, err)
		}
	}()
	if peer < 0 || peer >= l.hub.n || peer == l.rank {
		return ErrBadPeer
	}
	if e := CtxError(ctx); e != nil {
		return e
	}
	k := matchKey{src: l.rank, dst: peer, tag: tag}
	if !send {
		k.src, k.dst = peer, l.rank
	}
	mine, partner, err := l.hub.post(l.rank, peer, k, send, buf)
	switch {
	case err != nil:
		return err
	case partner != nil:
		return meet(send, buf, partner)
	}
	return l.hub.await(ctx, k, mine)
}

// post is rank's half of the rendezvous on k, with peer: it takes the
// partner's pending operation if one is waiting (the caller copies), or
// queues and returns its own.
func (h *hub) post(rank, peer int, k matchKey, send bool, buf []byte) (mine, partner *pending, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.checkLocked(rank, peer, k.tag); e != nil {
		return nil, nil, e
	}
	if send && h.retired[peer].Has(k.tag.Group) {
		return nil, nil, refusedError(peer, k.tag.Group)
	}
	q := h.queues[k]
	if q == nil {
		q = &queue{}
		h.queues[k] = q
	}
	partners, own := &q.recvs, &q.sends
	if !send {
		partners, own = &q.sends, &q.recvs
	}
	if len(*partners) > 0 {
		p := (*partners)[0]
		(*partners)[0] = nil
		*partners = (*partners)[1:]
		h.dropIfEmptyLocked(k, q)
		return nil, p, nil
	}
	p := &pending{buf: buf, done: make(chan error, 1)}
	*own = append(*own, p)
	return p, nil, nil
}

// meet completes the rendezvous with the waiting partner p: one copy
// between buf and p's buffer, outside the hub's lock, and the outcome to
// both sides.
func meet(send bool, buf []byte, p *pending) error {
	if len(p.buf) != len(buf) {
		sent, recv := len(buf), len(p.buf)
		if !send {
			sent, recv = recv, sent
		}
		e := fmt.Errorf("%w: sent %d bytes, receive buffer %d", ErrSizeMismatch, sent, recv)
		p.done <- e
		return e
	}
	if send {
		copy(p.buf, buf)
	} else {
		copy(buf, p.buf)
	}
	p.done <- nil
	return nil
}

// await waits for a partner to complete p, queued on k, or for ctx to end;
// then p leaves the queue unless a partner has already taken it.
func (h *hub) await(ctx context.Context, k matchKey, p *pending) error {
	// The partner is often microseconds away: poll before parking (see
	// internal/spin).
	spin.Until(spin.Budget(), func() bool { return len(p.done) > 0 })
	select {
	case e := <-p.done:
		return e
	case <-ctx.Done():
	}
	h.mu.Lock()
	if q := h.queues[k]; q != nil && (remove(&q.sends, p) || remove(&q.recvs, p)) {
		h.dropIfEmptyLocked(k, q)
		h.mu.Unlock()
		return CtxError(ctx)
	}
	h.mu.Unlock()
	// Already matched: the partner is copying (a bounded memcpy) and will
	// report the outcome.
	return <-p.done
}

func (h *hub) checkLocked(rank, peer int, tag Tag) error {
	if h.closed[rank] {
		return ErrClosed
	}
	if a := h.aborted.Of(tag); a != nil {
		return a
	}
	if h.retired[rank].Has(tag.Group) {
		return StaleError(tag.Group)
	}
	if peer >= 0 && h.closed[peer] {
		return fmt.Errorf("%w: rank %d closed", ErrPeerLost, peer)
	}
	return nil
}

func (h *hub) dropIfEmptyLocked(k matchKey, q *queue) {
	if len(q.sends) == 0 && len(q.recvs) == 0 {
		delete(h.queues, k)
	}
}

func remove(list *[]*pending, p *pending) bool {
	for i, x := range *list {
		if x == p {
			*list = append((*list)[:i], (*list)[i+1:]...)
			return true
		}
	}
	return false
}

func (l *local) Abort(tag Tag, cause error) {
	if cause == nil {
		cause = fmt.Errorf("no cause given")
	}
	h := l.hub
	h.mu.Lock()
	k := keyOf(tag)
	a := &AbortError{Origin: l.rank, Group: tag.Group, Seq: tag.Seq, Cause: cause}
	if !h.aborted.Record(a, 0, true) {
		h.mu.Unlock()
		return
	}
	for mk, q := range h.queues {
		if keyOf(mk.tag) == k {
			failAll(q, a, a)
			delete(h.queues, mk)
		}
	}
	var ws []*window
	for t, w := range h.windows {
		if keyOf(t) == k {
			ws = append(ws, w)
			delete(h.windows, t)
		}
	}
	h.mu.Unlock()
	for _, w := range ws {
		w.fail(a)
	}
}

func failAll(q *queue, sendErr, recvErr error) {
	for _, p := range q.sends {
		p.done <- sendErr
	}
	for _, p := range q.recvs {
		p.done <- recvErr
	}
}

func (l *local) Close() error {
	h := l.hub
	h.mu.Lock()
	if h.closed[l.rank] {
		h.mu.Unlock()
		return nil
	}
	h.closed[l.rank] = true
	lost := fmt.Errorf("%w: rank %d closed", ErrPeerLost, l.rank)
	for mk, q := range h.queues {
		switch l.rank {
		case mk.src: // our sends fail closed, the peer's recvs fail lost
			failAll(q, ErrClosed, lost)
		case mk.dst:
			failAll(q, lost, ErrClosed)
		default:
			continue
		}
		delete(h.queues, mk)
	}
	ws := make([]*window, 0, len(h.windows))
	for t, w := range h.windows {
		ws = append(ws, w)
		delete(h.windows, t)
	}
	h.mu.Unlock()
	for _, w := range ws {
		w.fail(lost)
	}
	return nil
}
