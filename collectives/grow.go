package collectives

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Rejoiner is how a group grows back (Group.Grow): it meets the processes
// that wait to take the ranks its world lost. collectives/cluster's Join
// gives one to the groups it makes (WithRejoiner), and the groups Shrink
// and Grow make from them keep it; a group without one does not grow.
type Rejoiner interface {
	// Rejoin is called by Grow on every member of a group, the same
	// Standing on each. When a process waits to take every
	// world rank the members lack, it returns the new group of the whole
	// world at Epoch+1, over a transport of its own (made with
	// WithEpoch, WithName(s.Base) and WithRejoiner); otherwise nil and
	// nil. It returns within ctx.
	Rejoin(ctx context.Context, s Standing) (*Group, error)
}

// Standing is where a group stands when it asks to grow: its epoch, how
// many times it asked before (Ask, from 0: the members' n-th asks are one
// ask), its members' world ranks (Group.Members), and the name its
// world's first group had (Base: the grown group's name is Base and its
// epoch).
type Standing struct {
	Epoch   uint64
	Ask     uint64
	Members []int
	Base    string
}

// WithRejoiner lets the group grow back through r (see Grow). Join sets
// it; a program rarely does.
func WithRejoiner(r Rejoiner) Option { return func(c *config) { c.rejoiner = r } }

// WithEpoch makes the group one of its world's at epoch e instead of 0:
// the group of a process that takes a lost rank of a running world, made
// by Join (and by a Rejoiner for the members), with the name the members'
// Grow gives it (its name and "/epoch-" e).
func WithEpoch(e uint64) Option { return func(c *config) { c.epoch = e } }

// Grow makes the group whole again: every member calls it, at the same
// point of its calls, and when a process waits to take every rank of the
// world the group lacks (a replacement for a lost rank, started by the
// launcher or by the user, that called Join with that rank), each member
// gets a new group of the whole world, at Epoch()+1, ranked as the world
// (Members() is 0..n-1), over a data plane of its own; the waiting
// processes' Join returns the same group. Otherwise (no process waits for
// some lacking rank, or none is lacking) Grow returns g itself and nil: a
// program calls it again later, for example once per step. A call costs
// one round trip to rank 0's control plane and waits for every member's.
//
// Grow first waits for the group's calls queued before it. When it
// returns a new group, g is finished, as after Shrink: its later calls
// fail with ErrClosed, its data plane is closed, and the new group's Close
// leaves the job. Only a group Join made, or one Shrink or Grow made from
// it, grows (others fail, wrapping errors.ErrUnsupported), and only while
// the world's rank 0 lives: rank 0 decides. ctx bounds the whole (when it
// has no deadline, the group's timeout does); on failure g stays as it
// was, though its peers may have moved on (its calls then fail with
// ErrPeerLost, and Shrink makes the group of those still there).
func (g *Group) Grow(ctx context.Context) (*Group, error) {
	where := fmt.Sprintf("collectives: grow group %d epoch %d rank %d", g.id, g.epoch, g.Rank())
	r := g.cfg.rejoiner
	if r == nil {
		return nil, fmt.Errorf("%s: only a group that Join made (or Shrink or Grow made from one) grows: %w", where, errors.ErrUnsupported)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.cfg.timeout)
		defer cancel()
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, fmt.Errorf("%s: the group was closed, shrunk or grown already: %w", where, ErrClosed)
	}
	ask := g.asks
	g.asks++
	wait, err := g.onComm("grow", func(context.Context) error { return nil }) // after every call queued before
	g.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, g.closedErr(err))
	}
	if err := wait(ctx); err != nil {
		return nil, fmt.Errorf("%s: waiting for the calls queued before: %w", where, err)
	}
	t0 := time.Now()
	ng, err := r.Rejoin(ctx, Standing{Epoch: g.epoch, Ask: ask, Members: g.Members(), Base: g.baseName()})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if ng == nil {
		return g, nil
	}
	g.mu.Lock()
	g.closed = true
	ng.onClose, g.onClose = g.onClose, nil
	g.mu.Unlock()
	if err := g.Close(); err != nil { // the old data plane: every member is past its calls
		g.rt.Logger().Warn("grow: closing the group grown from", zap.String("group", g.Name()), zap.Error(err))
	}
	g.rt.Logger().Info("group grown", zap.String("group", ng.Name()), zap.Uint64("epoch", ng.epoch),
		zap.Int("rank", ng.Rank()), zap.Int("size", ng.Size()), zap.Ints("members_before", g.members),
		zap.Duration("took", time.Since(t0)))
	return ng, nil
}
