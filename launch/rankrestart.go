package launch

import (
	"fmt"

	"go.uber.org/zap"
)

// RankRestart is a lost rank that an elastic launch with restarts
// (Spec.Elastic with Spec.MaxRestarts) starts again, as
// Spec.RankRestarting hears of it.
type RankRestart struct {
	Rank int
	// Count is how many times the rank has been started again, this time
	// included: its replacement's CHOREO_RESTART_COUNT (1 the first time).
	Count int
	// N is the launch's restart, 1 to Max (Spec.MaxRestarts): the launch's
	// restarts are counted over all its ranks.
	N, Max int
	// Cause is the loss of the process it replaces.
	Cause Loss
}

// String is the restart in one line: "restarting rank 2 (restart 1 of 3;
// CHOREO_RESTART_COUNT=1)".
func (r RankRestart) String() string {
	return fmt.Sprintf("restarting rank %d (restart %d of %d; %s=%d)", r.Rank, r.N, r.Max, EnvRestartCount, r.Count)
}

// elastic is an elastic launch's handling of the losses of one node's
// ranks: it reports each (Spec.Lost) and, while Spec.MaxRestarts allows,
// starts the lost rank again at once (Spec.RankRestarting), with its
// rank's environment and its own restart count. Only the supervising
// goroutine uses it.
type elastic struct {
	s      Spec
	g      *group
	j      *joinedListener
	ranks  *rankStarter
	last   func(exit) string // a process's last line
	used   int               // restarts made, over all ranks
	counts map[int]int       // each rank's restarts so far
	lost0  bool              // rank 0, which hosts the rendezvous, was lost
}

// lost is the group's onLost: it reports the loss e, with running ranks
// going on, and returns the rank's replacement, started, or nil.
func (el *elastic) lost(e exit, running int) *member {
	s := el.s
	l := lossOf(e, running, el.last(e))
	l.Restart, l.Joined = e.m.restart, el.j.joined(e.m.id, e.m.restart)
	l.NoRestart = el.refusal(l)
	if l.Rank == 0 {
		el.lost0 = true
	}
	s.Log.Warn("rank lost", zap.Int("rank", l.Rank), zap.Int("restart", l.Restart), zap.Bool("joined", l.Joined),
		zap.String("status", l.Status), zap.Int("running", running))
	if l.NoRestart != "" {
		s.Log.Warn("rank not restarted", zap.Int("rank", l.Rank), zap.String("why", l.NoRestart))
	}
	if s.Lost != nil {
		s.Lost(l)
	}
	if s.MaxRestarts == 0 || l.NoRestart != "" {
		return nil
	}
	el.used++
	el.counts[l.Rank]++
	r := RankRestart{Rank: l.Rank, Count: el.counts[l.Rank], N: el.used, Max: s.MaxRestarts, Cause: l}
	s.Log.Warn("restarting rank", zap.Int("rank", r.Rank), zap.Int("count", r.Count), zap.Int("restart", r.N),
		zap.Int("max_restarts", r.Max))
	if s.RankRestarting != nil {
		s.RankRestarting(r)
	}
	m, err := el.ranks.member(l.Rank-el.ranks.base, r.Count)
	if err == nil {
		err = el.g.start(m)
	}
	if err != nil {
		err = fmt.Errorf("launch: restart rank %d (%s): %w", r.Rank, s.Argv[0], err)
		s.Log.Error("rank not restarted", zap.Int("rank", r.Rank), zap.Error(err))
		if s.Lost != nil { // what was to replace it is lost as it starts
			s.Lost(Loss{Rank: r.Rank, Restart: r.Count, Code: -1, Status: "not started: " + err.Error(), Running: running})
		}
		return nil
	}
	return m
}

// refusal is why the loss l is not restarted, or "" when it is (or the
// launch has no restarts).
func (el *elastic) refusal(l Loss) string {
	switch {
	case el.s.MaxRestarts == 0:
		return ""
	case l.Rank == 0:
		return "rank 0 hosts the group's rendezvous, without which no rank can rejoin"
	case l.Running == 0:
		return "no other rank is running"
	case el.lost0:
		return "rank 0, which hosts the group's rendezvous, was lost before: no rank can rejoin"
	case el.used >= el.s.MaxRestarts:
		return fmt.Sprintf("the launch's %d restarts are used", el.s.MaxRestarts)
	}
	return ""
}
