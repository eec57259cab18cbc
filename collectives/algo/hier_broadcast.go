package algo

// hierBroadcast broadcasts the root's buf in two levels: a binomial tree
// across hosts, over the root and the leader of every other host (host
// order), then a binomial tree inside each host from the rank that got it
// (the root on its own host, the leader elsewhere). Hosts may hold
// different numbers of ranks. Each byte crosses to every other host once.
func (c *coll) hierBroadcast(buf []byte) error {
	if err := c.match(); err != nil {
		return err
	}
	t := c.o.Topology
	h, rootHost := t.Host(c.rank), t.Host(c.d.Root)
	heads := make([]int, t.Hosts())
	for hh := range heads {
		heads[hh] = t.Leader(hh)
	}
	heads[rootHost] = c.d.Root
	if c.rank == heads[h] {
		cross := c.sub(heads, h, hierStepCross, c.d.Count)
		cross.d.Root = rootHost
		if err := cross.tree(buf); err != nil {
			return err
		}
	}
	intra := c.sub(t.Ranks(h), t.Local(c.rank), hierStepIntra2, c.d.Count)
	intra.d.Root = t.Local(heads[h])
	return intra.tree(buf)
}
