package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/transport"
)

// lineage is where a group stands among the groups its world went
// through: the world's transport, root (the one New, Local or NewJoined
// was given, traced where the group is), this group's ranks as ranks of
// root (members), its epoch (0 for a group made from a transport or by
// Split, one more for each Shrink) and whether its Close closes root
// (owns, under Group.mu: a world's group owns root until Shrink hands it
// to the group that replaces it).
type lineage struct {
	root    transport.Transport
	retirer transport.Retirer // root's own, where it can retire groups; nil else
	members []int
	epoch   uint64
	owns    bool
	base    string // the epoch-0 group's name, which the later epochs' names extend
}

// newLineage is the lineage of a group made over t (raw: t under any
// tracing): the world itself, at epoch 0.
func newLineage(t, raw transport.Transport, epoch uint64) lineage {
	r, _ := raw.(transport.Retirer)
	m := make([]int, t.Size())
	for i := range m {
		m[i] = i
	}
	return lineage{root: t, retirer: r, members: m, owns: true, epoch: epoch}
}

// Epoch is the number of times the group's world was shrunk or grown
// back to make this group: 0 for a group made by New, Local, Join or
// Split, its predecessor's plus one for a group Shrink or Grow made, and
// the members' for the group of a process that took a lost rank (Join).
func (g *Group) Epoch() uint64 { return g.epoch }

// Members are this group's ranks as ranks of the world it descends from
// (the transport New, Local or Join started with): Members()[r] is rank
// r's rank there. A world's own group has 0..Size()-1; a shrunk one the
// survivors', in their old order.
func (g *Group) Members() []int { return slices.Clone(g.members) }

// Shrink replaces the group by one without its lost ranks. Every surviving
// rank calls it, after a collective failed with ErrPeerLost, or with
// ErrStale (a peer has called Shrink already and refuses the group's
// messages), or at any time (then no rank is lost and the new group has
// every rank). The
// survivors agree on who is left, over the transport, from the losses the
// transport itself reports (no clock decides that a peer is gone: a
// survivor that calls late is waited for), and each gets a new group of
// the survivors, ranked densely in their old order, at Epoch()+1, with an
// id no earlier epoch had.
//
// The group is finished from the call on, whatever the outcome: its later
// calls fail at once with ErrClosed, and its collectives still queued or
// running fail with ErrStale (on a transport that retires groups, as
// Local's and the TCP and shared-memory transports do: its messages are
// refused from now on, and a message of it that arrives late never meets
// the new group, whose tags differ). The new group takes over the
// transport: its Close closes it (and leaves the job, for a group Join
// made); this group's Close then releases only its own stream and buffers.
//
// A rank the survivors left out (one that others lost, though it is
// alive) gets an error wrapping ErrEvicted, as does a rank whose transport
// reports it evicted. ctx bounds the whole agreement (when it has no
// deadline, the group's timeout does): at its end Shrink fails with
// ErrTimeout. On any failure the group stays finished and keeps the
// transport, which its Close closes.
//
// A shrunk group runs its collectives on the host path (its world's Split
// groups are not carried over, nor an in-process world's early match of
// calls). Groups on the device or the engine data path (DataPathDevice,
// DataPathNCCL) do not shrink yet: Shrink fails at once, wrapping
// errors.ErrUnsupported, and leaves the group as it was.
func (g *Group) Shrink(ctx context.Context) (*Group, error) {
	where := fmt.Sprintf("collectives: shrink group %d epoch %d rank %d", g.id, g.epoch, g.Rank())
	if p := g.cfg.datapath; p == DataPathDevice || p == DataPathNCCL {
		return nil, fmt.Errorf("%s: a group on the %s data path does not shrink yet (make it with DataPathStaged or DataPathAuto): %w",
			where, p, errors.ErrUnsupported)
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, fmt.Errorf("%s: the group was closed or shrunk already: %w", where, ErrClosed)
	}
	g.closed = true
	old := g.inFlight()
	g.mu.Unlock()
	g.retire(old)

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.cfg.timeout)
		defer cancel()
	}
	t0 := time.Now()
	epoch := g.epoch + 1
	agreementID := derivedID("shrink agreement", g.id, epoch)
	out, err := agree(ctx, g.t, agreementID)
	if g.retirer != nil {
		g.retirer.Retire(agreementID) // what peers sent after this rank's last round
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	var survivors, lost []int
	for r, l := range out.lost {
		if l {
			lost = append(lost, r)
		} else {
			survivors = append(survivors, r)
		}
	}
	if out.lost[g.Rank()] {
		return nil, fmt.Errorf("%s: the survivors %v left this rank out: %w", where, survivors, ErrEvicted)
	}
	ng, err := g.successor(epoch, survivors)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	g.rt.Logger().Info("group shrunk", zap.String("group", ng.Name()), zap.Uint64("epoch", epoch),
		zap.Int("rank", ng.Rank()), zap.Int("size", ng.Size()), zap.Ints("lost", lost), zap.Ints("members", ng.members),
		zap.Int("rounds", out.rounds), zap.Duration("took", time.Since(t0)))
	return ng, nil
}

// successor makes the group of survivors (ranks of g) at epoch, over g's
// root, and hands it g's transport and leave when g has them.
func (g *Group) successor(epoch uint64, survivors []int) (*Group, error) {
	me := slices.Index(survivors, g.Rank())
	members := make([]int, len(survivors))
	for i, r := range survivors {
		members[i] = g.members[r]
	}
	base := g.baseName()
	cfg := g.cfg
	cfg.hosts = hostsOf(g.cfg.hosts, survivors)
	cfg.name = fmt.Sprintf("%s/epoch-%d", base, epoch)
	cfg.epoch = 0 // named here
	t := &epochTransport{subTransport{parent: g.root, ranks: members, rank: me}}
	ng, err := newGroup(g.rt, t, derivedID("shrunk group", g.id, epoch, members...), cfg)
	if err != nil {
		return nil, err
	}
	ng.lineage = lineage{root: g.root, retirer: g.retirer, members: members, epoch: epoch, base: base}
	g.mu.Lock()
	released := g.released
	ng.owns, ng.onClose = g.owns, g.onClose
	g.owns, g.onClose = false, nil
	g.mu.Unlock()
	if released { // closed during the agreement: the transport is gone
		_ = ng.Close()
		return nil, fmt.Errorf("the group was closed while shrinking: %w", ErrClosed)
	}
	return ng, nil
}

// baseName is the name of the first group of g's world, which the names
// of its later epochs extend.
func (g *Group) baseName() string {
	if g.base != "" {
		return g.base
	}
	return g.cfg.name
}

// epochTransport is a shrunk group's view of its world's transport: a
// subTransport (rank i is the world's rank ranks[i]) of a type of its
// own, so that the group is named for its epoch, not as a Split's.
type epochTransport struct{ subTransport }

// inFlight is the sequence numbers g has handed out (under g.mu), for
// retiring them on a transport that cannot retire a whole group.
func (g *Group) inFlight() stale {
	return stale{seq: g.seq, sends: slices.Clone(g.sendSeq), recvs: slices.Clone(g.recvSeq), queued: g.comm.Pending()}
}

// stale is what a finished group had handed out when Shrink began.
type stale struct {
	seq          uint64
	sends, recvs []uint64
	queued       int
}

// staleAborts bounds how many of each sequence's latest numbers retire
// aborts on a transport that cannot retire a group.
const staleAborts = 256

// retire makes the finished group's calls fail with ErrStale: the
// transport retires its id where it can (its queued and running calls
// fail at once, its late messages are refused; Local's also fails the
// group's windows); else the calls that may still be queued or running
// (the comm stream's, at most staleAborts of each sequence) are aborted,
// with ErrStale as their cause.
func (g *Group) retire(s stale) {
	if g.retirer != nil {
		g.retirer.Retire(g.id)
		return
	}
	cause := fmt.Errorf("group %d epoch %d was shrunk: %w", g.id, g.epoch, ErrStale)
	k := uint64(min(s.queued+1, staleAborts))
	for i := range min(k, s.seq) {
		g.t.Abort(algoTag(g.id, s.seq-i), cause)
	}
	me := g.Rank()
	for p := range s.sends {
		if p == me {
			continue
		}
		for i := range min(k, s.sends[p]) {
			g.t.Abort(algo.P2PTag(g.id, me, p, s.sends[p]-i), cause)
		}
		for i := range min(k, s.recvs[p]) {
			g.t.Abort(algo.P2PTag(g.id, p, me, s.recvs[p]-i), cause)
		}
	}
}

// derivedID is the id of a group derived from group: a hash of what,
// group, epoch and members, with the derived bit set (never a world's).
func derivedID(what string, group, epoch uint64, members ...int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(what))
	_ = binary.Write(h, binary.LittleEndian, [2]uint64{group, epoch})
	for _, m := range members {
		_ = binary.Write(h, binary.LittleEndian, uint64(m))
	}
	return transport.DerivedGroup(h.Sum64())
}
