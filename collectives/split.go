package collectives

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// Split is a collective over the group that divides it like MPI_Comm_split:
// ranks that pass the same color form a new group, ordered by key (ties by
// their rank here). A rank that passes a negative color joins no group and
// gets nil. The new group has its own communication stream per rank and
// its own sequence numbers; it shares this group's transport.
//
// Split blocks until every rank of the group has called it (or the
// group's timeout passes: then it returns ErrTimeout, and a dead peer
// ErrPeerLost); its errors come back here, never later.
func (g *Group) Split(color, key int) (*Group, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, fmt.Errorf("collectives: split rank %d: %w", g.Rank(), ErrClosed)
	}
	g.seq++
	seq := g.seq
	n := g.Size()
	mine := make([]byte, 16)
	binary.LittleEndian.PutUint64(mine, uint64(int64(color)))
	binary.LittleEndian.PutUint64(mine[8:], uint64(int64(key)))
	all := make([]byte, 16*n)
	d := algo.Desc{Kind: algo.KindSplit, Group: g.id, Seq: seq, DType: gpu.Int64, Count: 2}
	wait, err := g.onComm("split", func(ctx context.Context) error {
		return algo.Split(ctx, g.t, d, mine, all, g.cfg.algo...)
	})
	g.mu.Unlock()
	if err == nil {
		err = wait(context.Background()) // bounded by the task's own deadline
	}
	if err != nil {
		return nil, g.closedErr(fmt.Errorf("collectives: split rank %d: %w", g.Rank(), err))
	}
	if color < 0 {
		return nil, nil
	}
	type member struct{ key, rank int }
	var members []member
	for r := range n {
		c := int(int64(binary.LittleEndian.Uint64(all[16*r:])))
		k := int(int64(binary.LittleEndian.Uint64(all[16*r+8:])))
		if c == color {
			members = append(members, member{k, r})
		}
	}
	slices.SortFunc(members, func(a, b member) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.rank, b.rank))
	})
	ranks := make([]int, len(members))
	me := -1
	for i, m := range members {
		ranks[i] = m.rank
		if m.rank == g.Rank() {
			me = i
		}
	}
	h := fnv.New64a()
	_ = binary.Write(h, binary.LittleEndian, [3]uint64{g.id, seq, uint64(int64(color))})
	id := transport.DerivedGroup(h.Sum64()) // never equal to a world's id
	sub := &subTransport{parent: g.t, ranks: ranks, rank: me}
	cfg := g.cfg
	cfg.hosts = hostsOf(g.cfg.hosts, ranks)
	cfg.rejoiner, cfg.epoch = nil, 0 // a part of the world does not grow back to it
	sg, err := newGroup(g.rt, sub, id, cfg)
	if sg != nil {
		sg.oneDevice = g.oneDevice // a subset of ranks on the one device
		members := make([]int, len(ranks))
		for i, r := range ranks {
			members[i] = g.members[r]
		}
		// The parent's transport stays the parent's; a subgroup's ranks
		// are ranks of the parent's world too.
		sg.lineage = lineage{root: g.root, retirer: g.retirer, members: members}
	}
	return sg, err
}

// subTransport is a group's view of a subset of its parent's ranks: rank i
// here is parent rank ranks[i]. Tags carry the subgroup's own id, so its
// messages never meet the parent's. Close does not close the parent.
type subTransport struct {
	parent transport.Transport
	ranks  []int
	rank   int
}

func (t *subTransport) Rank() int { return t.rank }
func (t *subTransport) Size() int { return len(t.ranks) }

func (t *subTransport) peer(r int) (int, error) {
	if r < 0 || r >= len(t.ranks) || r == t.rank {
		return 0, fmt.Errorf("collectives: subgroup rank %d: peer %d of %d: %w", t.rank, r, len(t.ranks), transport.ErrBadPeer)
	}
	return t.ranks[r], nil
}

// Send implements transport.Transport.
func (t *subTransport) Send(ctx context.Context, dst int, tag transport.Tag, data []byte) error {
	p, err := t.peer(dst)
	if err != nil {
		return err
	}
	return t.parent.Send(ctx, p, tag, data)
}

// Recv implements transport.Transport.
func (t *subTransport) Recv(ctx context.Context, src int, tag transport.Tag, into []byte) error {
	p, err := t.peer(src)
	if err != nil {
		return err
	}
	return t.parent.Recv(ctx, p, tag, into)
}

// TrySend implements transport.TrySender where the parent does (else it
// sends nothing: done is false).
func (t *subTransport) TrySend(ctx context.Context, dst int, tag transport.Tag, data []byte) (bool, error) {
	ts, ok := t.parent.(transport.TrySender)
	if !ok {
		return false, nil
	}
	p, err := t.peer(dst)
	if err != nil {
		return true, err
	}
	return ts.TrySend(ctx, p, tag, data)
}

// Abort implements transport.Transport.
func (t *subTransport) Abort(tag transport.Tag, cause error) { t.parent.Abort(tag, cause) }

// Close implements transport.Transport; the parent stays open.
func (t *subTransport) Close() error { return nil }
