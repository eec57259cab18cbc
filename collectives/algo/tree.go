package algo

import "github.com/choreo-gpu/choreo/collectives/transport"

const stepTree = stepData + 96

// tree broadcasts buf from the root down a binomial tree (ranks relative to
// the root; rank v's parent is v with its lowest set bit cleared), chunked:
// a rank forwards chunk k to its children while it receives chunk k+1, one
// sender goroutine per child.
func (c *coll) tree(buf []byte) error {
	n := c.n
	if n == 1 {
		return nil
	}
	bt := newBinomialTree(n, c.d.Root, c.rank)
	parent, children := bt.parent, bt.children
	chunk := c.chunkBytes()
	k := (len(buf) + chunk - 1) / chunk
	piece := func(i int) []byte { return buf[i*chunk : min((i+1)*chunk, len(buf))] }

	g := newTasks(c.ctx)
	ctx := g.ctx
	feeds := make([]chan int, len(children))
	for j, child := range children {
		feed := make(chan int, k)
		feeds[j] = feed
		g.goDo(func() error {
			for i := 0; i < k; i++ {
				select {
				case <-feed:
				case <-ctx.Done():
					return transport.CtxError(ctx)
				}
				if err := c.t.Send(ctx, child, c.tag(stepTree), piece(i)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for i := 0; i < k; i++ {
		if parent >= 0 {
			if err := c.t.Recv(ctx, parent, c.tag(stepTree), piece(i)); err != nil {
				g.fail(err)
				break
			}
		}
		for _, f := range feeds {
			f <- i // never blocks: capacity k
		}
	}
	return g.wait()
}
