package algo

import (
	"context"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// pairwise sends sendTo(p) to every peer p and receives recvFrom(p) from
// every peer p, all at once, on one step (each ordered pair exchanges one
// message on it), under ctx. Sends that go at once (transport.TrySender) are made on this
// goroutine; the rest, and all receives but the last, get goroutines of
// their own. It returns when all are done, or at the first failure, which
// stops the others.
func (c *coll) pairwise(ctx context.Context, step uint32, sendTo, recvFrom func(p int) []byte) error {
	if c.n == 2 {
		p := 1 - c.rank
		return c.exchange(ctx, step, p, sendTo(p), p, recvFrom(p))
	}
	g := newTasks(ctx)
	ts, _ := c.t.(transport.TrySender)
	for k := 1; k < c.n; k++ {
		dst := mod(c.rank+k, c.n)
		if ts != nil {
			done, err := ts.TrySend(g.ctx, dst, c.tag(step), sendTo(dst))
			if done {
				g.fail(err)
				continue
			}
		}
		g.goDo(func() error { return c.t.Send(g.ctx, dst, c.tag(step), sendTo(dst)) })
	}
	for k := 1; k < c.n-1; k++ {
		src := mod(c.rank-k, c.n)
		g.goDo(func() error { return c.t.Recv(g.ctx, src, c.tag(step), recvFrom(src)) })
	}
	last := mod(c.rank+1, c.n)
	g.fail(c.t.Recv(g.ctx, last, c.tag(step), recvFrom(last)))
	return g.wait()
}
