package algo

import (
	"context"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Broadcast copies d.Root's buf (d.Count elements) into every other rank's
// buf.
func Broadcast(ctx context.Context, t transport.Transport, d Desc, buf []byte, opts ...Option) error {
	c := newColl(ctx, t, d, KindBroadcast, opts)
	return c.finish(c.broadcast(buf))
}

func (c *coll) broadcast(buf []byte) error {
	if err := c.checkBasic(); err != nil {
		return err
	}
	if err := c.checkLen("buffer", buf, c.d.Count); err != nil {
		return err
	}
	if err := c.resolve(len(buf), false); err != nil {
		return err
	}
	if c.n == 1 {
		return c.postMatch()
	}
	if c.alg == Direct {
		return c.directBroadcast(buf)
	}
	if c.alg == Hierarchical {
		return c.hierBroadcast(buf)
	}
	if err := c.match(); err != nil {
		return err
	}
	return c.tree(buf)
}
