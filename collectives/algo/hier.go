package algo

import (
	"context"
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// The hierarchical algorithms (hier_*.go) run a collective in two levels
// over the group's Topology: inside each host (ranks that share a host,
// whose links are fast: shared memory) and across hosts (one rank per host
// in each cross-host ring or tree, so the slow links carry each byte once
// per host instead of once per rank crossing them). Each level is one of
// the flat algorithms (ring, binomial tree) run by a sub-collective: a coll
// over a view of the group's transport that holds only the level's ranks.
//
// After one match of the whole group (whose signature carries the
// topology's fingerprint), the levels follow each other on every rank;
// each level's messages carry a step range of their own (hierStepIntra1,
// hierStepCross, hierStepIntra2), so no message of one level meets a
// receive of another.

// Step offsets of the levels: a level's own steps (stepData + the ring's or
// the tree's, below hierRowStep) are added to its offset, and a level that
// runs several rings at once (one per host: rowRings; one per part of a
// pipelined all-reduce) adds hierRowStep per ring; all below
// transport.MaxStep.
const (
	hierStepIntra1 = 1 << 16 // the first level inside each host
	hierStepCross  = 2 << 16 // the level across hosts
	hierStepIntra2 = 3 << 16 // the second level inside each host
	hierRowStep    = 1 << 8
	// maxHierHosts bounds the hosts of an all-gather or reduce-scatter in
	// levels: their rings per host must fit between two levels' offsets.
	maxHierHosts = hierStepIntra1 / hierRowStep
)

// hierAuto reports whether Auto takes the levels for a payload of bytes
// (per rank, as resolve sees it) where the topology allows them: never
// for broadcast; above DefaultHierBytes for all-reduce and above
// DefaultHierGatherBytes for all-gather and reduce-scatter, or above
// Options.HierBytes where it is set (negative: any payload).
func (c *coll) hierAuto(bytes int) bool {
	limit := c.o.HierBytes
	switch c.d.Kind {
	case KindAllReduce:
		if limit == 0 {
			limit = DefaultHierBytes
		}
	case KindAllGather, KindReduceScatter:
		if limit == 0 {
			limit = DefaultHierGatherBytes
		}
	default:
		return false
	}
	return bytes > limit
}

// hierFits reports whether the group's topology allows the hierarchical
// algorithm of this collective: a topology of the group's size that spans
// hosts with more than one rank on some host; all-reduce, all-gather and
// reduce-scatter also need the same number of ranks on every host (their
// cross-host rings join the ranks of equal local index), broadcast does
// not (its cross-host tree joins the root and the other hosts' leaders).
// All-gather and reduce-scatter also need at most maxHierHosts hosts.
// Other collectives stay flat.
func (c *coll) hierFits() bool {
	t := c.o.Topology
	if t == nil || t.Size() != c.n || !c.tagged || !t.Spans() {
		return false
	}
	switch c.d.Kind {
	case KindBroadcast:
		return true
	case KindAllReduce:
		return t.Even() > 0
	case KindAllGather, KindReduceScatter:
		return t.Even() > 0 && t.Hosts() <= maxHierHosts
	}
	return false
}

// rowRings runs one ring inside this rank's host for each of the m hosts
// at once (ring hh on steps off + hh*hierRowStep), spec(hh) being host
// hh's: the level of all-gather and reduce-scatter inside each host, where
// the block of local rank q in ring hh is the block of host hh's rank q,
// contiguous in the caller's buffers. The first failure stops them all.
func (c *coll) rowRings(host []int, j int, off uint32, m int, spec func(hh int) ringSpec) error {
	g := newTasks(c.ctx)
	for hh := range m {
		s := c.sub(host, j, off+uint32(hh)*hierRowStep, c.d.Count)
		s.ctx = g.ctx
		g.goDo(func() error { return s.ring(spec(hh)) })
	}
	return g.wait()
}

// sub is a sub-collective of c over ranks (c's ranks, in the level's
// order; this rank is ranks[me]), whose messages carry steps offset by
// off, with count elements: it runs a flat algorithm on that level, with
// c's context, options, descriptor (Count aside) and collective tag, and no
// match of its own (c's match covered it).
func (c *coll) sub(ranks []int, me int, off uint32, count int) *coll {
	d := c.d
	d.Count = count
	v := &view{t: c.t, ranks: ranks, rank: me, off: off}
	return &coll{ctx: c.ctx, t: v, d: d, o: c.o, rank: me, n: len(ranks), alg: Ring, base: c.base, tagged: c.tagged}
}

// view is a level's transport: rank i of the view is rank ranks[i] of the
// group's transport t, and every step is offset by off. Abort reaches the
// whole collective; Close leaves t open. It has no PeerAccess: the levels
// run on messages.
type view struct {
	t     transport.Transport
	ranks []int
	rank  int
	off   uint32
}

func (v *view) Rank() int { return v.rank }
func (v *view) Size() int { return len(v.ranks) }

func (v *view) peer(r int) (int, error) {
	if r < 0 || r >= len(v.ranks) || r == v.rank {
		return 0, fmt.Errorf("level rank %d: peer %d of %d: %w", v.rank, r, len(v.ranks), transport.ErrBadPeer)
	}
	return v.ranks[r], nil
}

func (v *view) tag(tag transport.Tag) transport.Tag {
	return tag.WithStep(tag.Step&(transport.MaxStep-1) + v.off)
}

// Send implements transport.Transport.
func (v *view) Send(ctx context.Context, dst int, tag transport.Tag, data []byte) error {
	p, err := v.peer(dst)
	if err != nil {
		return err
	}
	return v.t.Send(ctx, p, v.tag(tag), data)
}

// Recv implements transport.Transport.
func (v *view) Recv(ctx context.Context, src int, tag transport.Tag, into []byte) error {
	p, err := v.peer(src)
	if err != nil {
		return err
	}
	return v.t.Recv(ctx, p, v.tag(tag), into)
}

// Abort implements transport.Transport: it aborts the whole collective.
func (v *view) Abort(tag transport.Tag, cause error) { v.t.Abort(tag, cause) }

// Close implements transport.Transport; the group's transport stays open.
func (v *view) Close() error { return nil }
