package algo

import (
	"context"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// The engine path's messages: the match (the host path's steps and sizes,
// with Engine in the signature, so ranks on different paths fail it) and
// the engine group's id, which rank 0 makes and sends to every rank when
// the group's first engine collective runs.
const stepEngineID = stepData + 2

// MatchEngine matches collective d among the ranks for the engine path. A
// mismatch, an invalid op or root fails every rank alike (Agreed).
func MatchEngine(ctx context.Context, t transport.Transport, d Desc) error {
	c := newColl(ctx, t, d, d.Kind, nil)
	c.alg = Engine
	if !c.tagged {
		return fmt.Errorf("algo: engine %s: seq %d part %d outside the tag layout: %w", d.Kind, d.Seq, d.Part, ErrBadArgument)
	}
	if c.n > 1 {
		if err := c.matchMessagesOf(c.signature().encode()); err != nil {
			return err
		}
	}
	return c.postMatch()
}

// ShareEngineID sends rank 0's engine id to every rank under collective
// d's tag and returns it on every rank. Rank 0 passes its id, or a nil id
// and the reason it has none; the other ranks pass size, the id's length.
// A rank 0 without an id fails every rank, the others with an error that
// says so.
func ShareEngineID(ctx context.Context, t transport.Transport, d Desc, id []byte, why error, size int) ([]byte, error) {
	c := newColl(ctx, t, d, d.Kind, nil)
	if !c.tagged {
		return nil, fmt.Errorf("algo: engine id: seq %d part %d outside the tag layout: %w", d.Seq, d.Part, ErrBadArgument)
	}
	msg := make([]byte, 1+size)
	if c.rank == 0 {
		if id != nil {
			if len(id) != size {
				return nil, fmt.Errorf("algo: engine id of %d bytes, want %d: %w", len(id), size, ErrBadArgument)
			}
			msg[0] = 1
			copy(msg[1:], id)
		}
		g := newTasks(ctx)
		for r := 1; r < c.n; r++ {
			g.goDo(func() error { return t.Send(g.ctx, r, c.tag(stepEngineID), msg) })
		}
		if err := g.wait(); err != nil {
			return nil, err
		}
		if id == nil {
			return nil, why
		}
		return id, nil
	}
	if err := t.Recv(ctx, 0, c.tag(stepEngineID), msg); err != nil {
		return nil, err
	}
	if msg[0] != 1 {
		return nil, fmt.Errorf("rank 0 could not start the engine (its error says why): %w", gpu.ErrNoBackend)
	}
	return msg[1:], nil
}

// stepEngineWatch is a step no rank sends on: a Recv there ends only when
// the collective is aborted or its peer is lost (or its context ends).
const stepEngineWatch = stepData + 3

// WatchPeers returns a context that ends with ctx, or as soon as
// collective d is aborted or a peer of this rank is lost, its cause then
// the transport's error (ErrAborted, ErrPeerLost): for waits that the
// transport does not see, as an engine's kernels. stop ends the watch; it
// must be called.
func WatchPeers(ctx context.Context, t transport.Transport, d Desc) (watched context.Context, stop func()) {
	c := newColl(ctx, t, d, d.Kind, nil)
	wctx, cancel := context.WithCancelCause(ctx)
	if !c.tagged || c.n == 1 {
		return wctx, func() { cancel(nil) }
	}
	for q := range c.n {
		if q == c.rank {
			continue
		}
		go func() {
			err := t.Recv(wctx, q, c.tag(stepEngineWatch), make([]byte, 1))
			if wctx.Err() == nil {
				if err == nil {
					err = fmt.Errorf("rank %d sent on the watch step: %w", q, ErrBadArgument)
				}
				cancel(err)
			}
		}()
	}
	return wctx, func() { cancel(nil) }
}
