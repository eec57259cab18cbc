package algo

import (
	"context"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// Barrier returns once every rank of the group has called it (with the same
// d.Group and d.Seq). It is the match alone: an Expose barrier over
// PeerAccess, a dissemination over messages. d.DType and d.Count are
// ignored.
func Barrier(ctx context.Context, t transport.Transport, d Desc, opts ...Option) error {
	c := newColl(ctx, t, d, KindBarrier, opts)
	return c.finish(c.barrier())
}

func (c *coll) barrier() error {
	if !c.tagged {
		return fmt.Errorf("seq %d >= %d: %w", c.d.Seq, uint64(transport.MaxSeq), ErrBadArgument)
	}
	c.alg = Ring
	if c.pa != nil {
		c.alg = Direct
	}
	return c.match()
}
