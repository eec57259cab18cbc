package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// exitEvicted is a rank's exit status when its group dropped it
// (collectives.ErrEvicted): it was silent too long and the others went on.
const exitEvicted = 4

// elasticFlags are the elastic soak's settings (run --elastic); every rank
// of a launch gets the same (args).
type elasticFlags struct {
	Elastic  bool          `help:"Soak all-reduces in an elastic group: when a rank is lost the others shrink their group (Group.Shrink) and go on, each step checked against the ranks of its epoch; the launcher goes on without the lost rank. When the launcher starts the lost rank again (choreorun --elastic --max-restarts N), the group grows back to the whole world (Group.Grow) at the next step and the restarted rank takes up the soak at the others' step."`
	Duration time.Duration `help:"With --elastic: soak for this long instead of --steps steps (the ranks agree each step whether to stop)."`
	KillRank int           `name:"kill-rank" help:"With --elastic: the rank (in the world at start) that kills itself with SIGKILL at step --kill-at (once: a process restarted to take the rank does not); -1: none." default:"-1"`
	KillAt   int           `name:"kill-at" help:"The step at which --kill-rank kills itself; default: half of --steps." default:"-1"`
}

// args is f as flags of `demo node run`.
func (f *elasticFlags) args() []string {
	if !f.Elastic {
		return nil
	}
	return []string{"--elastic", "--duration=" + f.Duration.String(),
		"--kill-rank=" + strconv.Itoa(f.KillRank), "--kill-at=" + strconv.Itoa(f.KillAt)}
}

// check refuses elastic settings that cannot run with steps steps.
func (f *elasticFlags) check(steps int) error {
	switch {
	case !f.Elastic && (f.Duration != 0 || f.KillRank >= 0 || f.KillAt >= 0):
		return errors.New("--duration, --kill-rank and --kill-at go with --elastic")
	case f.Duration < 0:
		return fmt.Errorf("--duration %v: want 0 (use --steps) or more", f.Duration)
	case f.KillAt >= 0 && f.KillRank < 0:
		return errors.New("--kill-at needs --kill-rank")
	case f.KillAt >= steps && f.Duration == 0:
		return fmt.Errorf("--kill-at %d: the soak has %d steps", f.KillAt, steps)
	}
	return nil
}

// soakLength is "40 steps" or "for 10s".
func (f *runFlags) soakLength() string {
	if f.Duration > 0 {
		return "for " + f.Duration.String()
	}
	return fmt.Sprintf("%d steps", f.Steps)
}

// killAt is the step at which KillRank kills itself.
func (f *runFlags) killAt() int {
	if f.KillAt >= 0 {
		return f.KillAt
	}
	return f.Steps / 2
}

// elasticArgs reports whether a launch's rank command line (run and its
// flags) asks for an elastic run.
func elasticArgs(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--elastic", "--elastic=true":
			return true
		}
	}
	return false
}

// runElastic joins this process's rank (Join tells an elastic launch's
// launcher, so that from then on its loss does not end the launch), soaks
// and leaves. A process the launcher started again to take a lost rank
// joins the same way: its Join returns once the others' group has grown
// back to admit it, and it does not trace (restartedUntraced).
func (c *nodeRunCmd) runElastic(g *globals) error {
	if err := c.restartedUntraced(g.log); err != nil {
		return err
	}
	w, err := joinWorld(g.log, c.Backend, c.Timeout, c.obsFlags)
	if err != nil {
		return err
	}
	defer w.close()
	if err := c.soak(w, g.log); err != nil {
		return err
	}
	err = w.finish(c.Timeout)
	lingerRank(c.MetricsLinger)
	return err
}

// soak is one rank's elastic soak: its group of the current epoch, its
// rank in the world at start (me), what it has done and checked.
type soak struct {
	f      *runFlags
	log    *zap.Logger
	dt     gpu.DType
	elems  int
	me     int
	g      *collectives.Group
	s      *streams.GPU
	start  time.Time
	world  int  // ranks in the world at start
	rejoin bool // this process took a lost rank: its Join gave a grown group
	growth growth
	shrink int   // shrinks done
	passed int64 // checks passed
	checks int64
	first  error           // the first failed check
	times  []time.Duration // each completed all-reduce's, from its fill
}

// median is the middle of ds, 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// soak runs the steps on w's one rank (a joined world): step k
// all-reduces (sum) a gradient filled with stepValue(its rank in the
// world at start, k) and checks every element against the sum over the
// ranks of the group's epoch (Group.Members). An all-reduce that fails
// because a rank was lost (ErrPeerLost, ErrAborted, ErrStale) shrinks the
// group (bounded by --timeout), the survivors agree on the step to resume
// at, and the soak goes on; this rank prints the new epoch, its members
// and the time from the failure to the next all-reduce completed. While
// the group lacks ranks, its members ask before each step to grow it back
// (growBack): when the launcher started a lost rank again, the group is
// the whole world again at the next epoch, and that process (whose Join
// gave it the grown group) takes up the soak at rank 0's step, to end
// with the others. A rank the group dropped (ErrEvicted) ends with
// exitEvicted. Each rank prints its own summary. w's group is the last
// epoch's when soak returns.
func (f *runFlags) soak(w *world, log *zap.Logger) error {
	dt, elems, err := f.shape()
	if err != nil {
		return err
	}
	sk := &soak{f: f, log: log, dt: dt, elems: elems, me: w.groups[0].Rank(), g: w.groups[0], s: w.s[0], start: time.Now(),
		world: w.size, rejoin: w.groups[0].Epoch() > 0}
	sk.growth.fresh, sk.growth.known = sk.rejoin, !sk.rejoin // a grown group's ranks are the world's
	defer func() { w.groups[0], w.size = sk.g, sk.g.Size() }()
	announce := sk.me == 0 && !sk.rejoin // once its first all-reduce is done: every rank has then told its launcher it joined
	var lines *stepProgress
	if sk.me == 0 && f.Duration == 0 {
		lines = newStepProgress(os.Stderr, f.Steps)
	}
	var (
		failedAt time.Time // the failure not yet recovered from
		cause    error
		steps    int // steps completed
	)
	for k := 0; ; {
		if f.Duration == 0 && k >= f.Steps {
			break
		}
		var (
			done time.Time
			stop bool
		)
		k, err = sk.growBack(k)
		if err == nil {
			if f.KillRank == sk.me && k == f.killAt() && !sk.rejoin { // a restarted rank does not kill itself again
				sk.die(k)
			}
			done, stop, err = sk.step(k)
		}
		if !failedAt.IsZero() && !done.IsZero() {
			sk.recovered(k, done, done.Sub(failedAt), cause)
			failedAt = time.Time{}
		}
		if err == nil {
			if announce {
				announce = false
				fmt.Printf("choreo demo: elastic soak: %s, %s all-reduces %s (%d x %s)\n",
					w.describe(), humanize.IBytes(uint64(elems*dt.Size())), f.soakLength(), elems, dt)
			}
			if k++; k > steps {
				steps = k
			}
			lines.done(k)
			if stop {
				break
			}
			continue
		}
		var xe *exitError
		if errors.As(err, &xe) {
			return err
		}
		if failedAt.IsZero() {
			failedAt, cause = time.Now(), err
			sk.growth.lost(failedAt)
		}
		if k, err = sk.recover(k, err); err != nil {
			return err
		}
	}
	sk.growthLine()
	members := sk.g.Members()
	fmt.Printf("rank %d: elastic soak done: %d steps, epoch %d (%d shrinks), members %v (rank %d of %d), checks passed %d/%d, all-reduce p50 %s\n",
		sk.me, steps, sk.g.Epoch(), sk.shrink, members, sk.g.Rank(), sk.g.Size(), sk.passed, sk.checks, median(sk.times).Round(time.Microsecond))
	if sk.first != nil {
		return fmt.Errorf("check failed: %w", sk.first)
	}
	return nil
}

// die kills this process with SIGKILL at step k (--kill-rank): a real
// process death, nothing said to the others.
func (sk *soak) die(k int) {
	fmt.Printf("rank %d: killing itself (SIGKILL) at step %d, epoch %d, t=%d\n", sk.me, k, sk.g.Epoch(), time.Now().UnixNano())
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Minute) // SIGKILL ends the process before this does
	os.Exit(1)
}

// lostPeer reports whether err is a failure the group shrinks past.
func lostPeer(err error) bool {
	return errors.Is(err, collectives.ErrPeerLost) || errors.Is(err, collectives.ErrAborted) ||
		errors.Is(err, collectives.ErrStale)
}

// evicted is the error a rank the group dropped ends with: one clear line
// (why, as err says it, without the failed collective's report) and
// exitEvicted.
func (sk *soak) evicted(k int, err error) error {
	why := ""
	if _, after, ok := strings.Cut(err.Error(), collectives.ErrEvicted.Error()+": "); ok {
		why = " (" + after + ")"
	}
	return &exitError{exitEvicted, fmt.Errorf("rank %d was evicted from its group at step %d, epoch %d%s; the others go on without it: %w",
		sk.me, k, sk.g.Epoch(), why, collectives.ErrEvicted)}
}

// step runs step k: the all-reduce and its check; with --duration it
// also has the ranks agree whether the soak's time is up (stop). done is
// when the all-reduce completed on this rank.
func (sk *soak) step(k int) (done time.Time, stop bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), sk.f.Timeout+5*time.Second)
	defer cancel()
	t0 := time.Now()
	x, err := array.Full(sk.s, []int{sk.elems}, sk.dt, stepValue(sk.me, k))
	if err != nil {
		return done, false, err
	}
	y, err := sk.g.AllReduce(sk.s, x, collectives.Sum, collectives.Donate())
	if err != nil {
		return done, false, err
	}
	defer func() { _ = y.Free() }()
	if err := y.Wait(ctx); err != nil {
		return done, false, err
	}
	done = time.Now()
	sk.times = append(sk.times, done.Sub(t0))
	vals, err := array.ToFloat64(ctx, y)
	if err != nil {
		return done, false, err
	}
	members := sk.g.Members()
	want := 0.0
	for _, m := range members {
		want += stepValue(m, k)
	}
	sk.checks++
	if err := checkAll(vals, want, sk.dt); err != nil {
		if sk.first == nil {
			sk.first = fmt.Errorf("step %d, epoch %d, members %v: %w", k, sk.g.Epoch(), members, err)
		}
	} else {
		sk.passed++
	}
	if sk.f.Duration == 0 {
		return done, false, nil
	}
	up := int64(0)
	if time.Since(sk.start) >= sk.f.Duration {
		up = 1
	}
	v, err := sk.reduce(ctx, up, collectives.Max)
	return done, v == 1, err
}

// reduce all-reduces one int64 over the group with op.
func (sk *soak) reduce(ctx context.Context, v int64, op collectives.Op) (int64, error) {
	x, err := array.FromSlice(sk.s, []int64{v})
	if err != nil {
		return 0, err
	}
	defer func() { _ = x.Free() }()
	y, err := sk.g.AllReduce(sk.s, x, op)
	if err != nil {
		return 0, err
	}
	defer func() { _ = y.Free() }()
	out, err := array.ToSlice[int64](ctx, y)
	if err != nil {
		return 0, err
	}
	return out[0], nil
}

// recover handles err, step k's failure: a lost rank shrinks the group
// (again, if a rank is lost while the survivors agree) and the survivors
// agree on the step to go on from (the least each has to redo: a rank may
// have finished step k before the loss reached it). It returns that step,
// or the error that ends the soak.
func (sk *soak) recover(k int, err error) (int, error) {
	for range sk.g.Size() { // each shrink loses at least one rank
		switch {
		case errors.Is(err, collectives.ErrEvicted):
			return k, sk.evicted(k, err)
		case !lostPeer(err):
			return k, fmt.Errorf("step %d, epoch %d: %w", k, sk.g.Epoch(), err)
		}
		old := sk.g.Epoch()
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), sk.f.Timeout)
		g, serr := sk.g.Shrink(ctx)
		cancel()
		switch {
		case errors.Is(serr, collectives.ErrEvicted):
			return k, sk.evicted(k, serr)
		case serr != nil:
			return k, fmt.Errorf("step %d: shrink epoch %d after %v: %w", k, old, err, serr)
		}
		_ = sk.g.Close() // the new group took the transport over: this releases the old one's stream and buffers
		sk.g = g
		sk.shrink++
		sk.log.Info("shrunk", zap.Int("rank", sk.me), zap.Uint64("epoch", g.Epoch()), zap.Ints("members", g.Members()),
			zap.Duration("took", time.Since(t0)), zap.Error(err))
		ctx, cancel = context.WithTimeout(context.Background(), sk.f.Timeout+5*time.Second)
		var next int64
		next, err = sk.reduce(ctx, int64(k), collectives.Min)
		cancel()
		if err == nil {
			return int(next), nil
		}
	}
	return k, fmt.Errorf("step %d: the group kept losing ranks: %w", k, err)
}

// recovered prints that step k's all-reduce, the first completed since
// the failure (cause), was done at done, d after the failure, in the new
// epoch.
func (sk *soak) recovered(k int, done time.Time, d time.Duration, cause error) {
	what := "peer lost"
	switch {
	case errors.Is(cause, collectives.ErrPeerLost):
	case errors.Is(cause, collectives.ErrStale):
		what = "stale epoch"
	case errors.Is(cause, collectives.ErrAborted):
		what = "aborted"
	}
	members := sk.g.Members()
	fmt.Printf("rank %d: epoch %d, members %v (rank %d of %d): step %d done %s after the failure (%s), t=%d\n",
		sk.me, sk.g.Epoch(), members, sk.g.Rank(), sk.g.Size(), k, d.Round(time.Microsecond), what, done.UnixNano())
	sk.log.Info("recovered", zap.Int("rank", sk.me), zap.Uint64("epoch", sk.g.Epoch()), zap.Ints("members", members),
		zap.Int("step", k), zap.Duration("since failure", d))
}
