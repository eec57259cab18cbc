package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	choreolaunch "github.com/choreo-gpu/choreo/launch"
)

// growTimeout bounds one ask to grow the group back (Group.Grow): an ask
// that finds no process waiting takes one round trip to rank 0, one that
// admits a replacement also builds the grown group's data plane.
const growTimeout = 10 * time.Second

// growth is what one rank of the elastic soak knows of growing its group
// back to the whole world: when the loss not yet made good was first seen
// (a failed call of this rank), how many times it asked and grew, whether
// its group can grow at all, and whether the members have yet to take
// rank 0's step (a group just grown, the replacement's included). The
// members' asks, grown, off and fresh are the same on each, so that they
// all make the same calls in the same order.
type growth struct {
	lostAt time.Time
	asks   int
	grown  int
	off    bool // the group does not grow (not made by Join): asking stopped
	fresh  bool // a grown group whose members have not taken rank 0's step yet
	known  bool // this rank knows the soak's step (a replacement learns it from rank 0)
	// The latest growth, for its line: when Grow returned, the members
	// before, and since when the loss it made good had been seen.
	at    time.Time
	from  []int
	since string
}

// wantsGrowth reports whether a group of the world's ranks members (in a
// world of size ranks) asks to grow back: it lacks some rank and still
// has the world's rank 0, which decides.
func wantsGrowth(members []int, size int) bool {
	return len(members) < size && len(members) > 0 && members[0] == 0
}

// lost notes that a call failed at t because a rank was lost, unless an
// earlier loss is not made good yet.
func (gr *growth) lost(t time.Time) {
	if gr.lostAt.IsZero() {
		gr.lostAt = t
	}
}

// growBack runs between steps, before step k: while the group lacks
// ranks it asks to grow back (bounded by growTimeout); once grown (or,
// on the replacement, joined grown) the members take rank 0's step, the
// step they all run next, which it returns. An error is a failed call
// the soak recovers from (a lost rank), or, on a replacement that has
// not yet learned the step, the end of its soak.
func (sk *soak) growBack(k int) (int, error) {
	gr := &sk.growth
	if !gr.fresh && !gr.off && wantsGrowth(sk.g.Members(), sk.world) {
		if err := sk.ask(); err != nil {
			return k, err
		}
	}
	if !gr.fresh {
		return k, nil
	}
	gr.fresh = false
	next, err := sk.rootStep(k)
	if err != nil && !gr.known {
		return k, &exitError{exitPeerLost, fmt.Errorf("rank %d: taking up the soak at epoch %d: %w", sk.me, sk.g.Epoch(), err)}
	}
	if err != nil {
		return k, err
	}
	g := sk.g
	if !gr.known {
		gr.known = true
		fmt.Printf("rank %d: took up the soak at step %d: epoch %d, size %d, members %v (rank %d of %d), t=%d\n",
			sk.me, next, g.Epoch(), g.Size(), g.Members(), g.Rank(), g.Size(), time.Now().UnixNano())
		sk.log.Info("took up the soak", zap.Int("rank", sk.me), zap.Uint64("epoch", g.Epoch()), zap.Int("step", next))
		return next, nil
	}
	fmt.Printf("rank %d: grew back at step %d: epoch %d, size %d, members %v (rank %d of %d), from %v, %s, t=%d\n",
		sk.me, next, g.Epoch(), g.Size(), g.Members(), g.Rank(), g.Size(), gr.from, gr.since, gr.at.UnixNano())
	sk.log.Info("grown", zap.Int("rank", sk.me), zap.Int("step", next), zap.Uint64("epoch", g.Epoch()), zap.Int("size", g.Size()),
		zap.Ints("from", gr.from), zap.String("since loss", gr.since))
	return next, nil
}

// ask asks once to grow the group back. A new group becomes the soak's
// (and fresh: growBack prints its line once the step is agreed); no
// process waiting leaves the group as it was. A group that cannot grow stops the asking; any
// other failure is logged, and the next call shows whether the peers went
// on without this rank (then the soak shrinks as after any loss).
func (sk *soak) ask() error {
	gr := &sk.growth
	ctx, cancel := context.WithTimeout(context.Background(), min(sk.f.Timeout, growTimeout))
	defer cancel()
	gr.asks++
	ng, err := sk.g.Grow(ctx)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		gr.off = true
		sk.log.Warn("the group does not grow back; the soak goes on without the lost ranks", zap.Int("rank", sk.me), zap.Error(err))
		return nil
	case errors.Is(err, collectives.ErrEvicted) || lostPeer(err):
		return err
	case err != nil:
		sk.log.Warn("asking to grow the group back failed", zap.Int("rank", sk.me), zap.Uint64("epoch", sk.g.Epoch()), zap.Error(err))
		return nil
	case ng == sk.g:
		return nil
	}
	gr.at, gr.from = time.Now(), sk.g.Members()
	sk.g = ng // Grow finished the old group and moved its leaving to ng
	gr.grown++
	gr.fresh = true
	gr.since = "no loss seen by this rank"
	if !gr.lostAt.IsZero() {
		gr.since = gr.at.Sub(gr.lostAt).Round(time.Millisecond).String() + " after the loss was seen"
	}
	if ng.Size() == sk.world {
		gr.lostAt = time.Time{}
	}
	return nil
}

// rootStep is rank 0's step k on every member (a broadcast over the
// group): the step a grown group's members run next. The survivors agree
// on it already; the replacement learns it here.
func (sk *soak) rootStep(k int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sk.f.Timeout+5*time.Second)
	defer cancel()
	x, err := array.FromSlice(sk.s, []int64{int64(k)})
	if err != nil {
		return k, err
	}
	defer func() { _ = x.Free() }()
	y, err := sk.g.Broadcast(sk.s, x, 0)
	if err != nil {
		return k, err
	}
	defer func() { _ = y.Free() }()
	out, err := array.ToSlice[int64](ctx, y)
	if err != nil {
		return k, err
	}
	if out[0] < 0 {
		return k, fmt.Errorf("rank 0's step %d: want 0 or more", out[0])
	}
	return int(out[0]), nil
}

// growthLine prints this rank's account of growing back, before its
// summary line.
func (sk *soak) growthLine() {
	took := ""
	if sk.rejoin {
		took = ", took up a lost rank"
	}
	fmt.Printf("rank %d: growths %d, asks to grow %d%s\n", sk.me, sk.growth.grown, sk.growth.asks, took)
}

// restartedUntraced turns tracing off in a process that the launcher
// started again (CHOREO_RESTART_COUNT 1 or more): a traced rank aligns
// its clock with rank 0's right after it joins, a call the members of a
// grown group, well past their start, do not make.
func (c *nodeRunCmd) restartedUntraced(log *zap.Logger) error {
	n := os.Getenv(choreolaunch.EnvRestartCount)
	if n == "" || n == "0" || (c.Trace == "" && os.Getenv(envTraceDir) == "") {
		return nil
	}
	log.Warn("a restarted rank of an elastic soak does not trace", zap.String(choreolaunch.EnvRestartCount, n))
	c.Trace = ""
	if err := os.Unsetenv(envTraceDir); err != nil {
		return fmt.Errorf("demo: restarted rank: not tracing: %w", err)
	}
	return nil
}
