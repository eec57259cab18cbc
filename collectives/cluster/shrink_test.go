package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// The Shrink test runs each rank in a process of its own (this test
// binary again, as TestShrinkRankProcess), kills one with SIGKILL, and
// reads what the survivors report.

const envShrinkRank = "CHOREO_TEST_SHRINK_RANK" // the rank's shrinkPlan, as JSON

// shrinkPlan is what a rank process of the Shrink test is told: how to
// join, and how many all-reduces to complete after the shrink.
type shrinkPlan struct {
	Join  JoinConfig
	After int
	// Grow: after the shrink the survivors call Grow before each step
	// until a replacement of the lost rank has joined, and count their
	// all-reduces at epoch 2; a replacement process (Join returns it at
	// epoch 2) counts the same.
	Grow bool
	// GrowAlways: every rank calls Grow before each step, whatever its
	// epoch, and counts its all-reduces at epoch 0 (no rank is lost).
	GrowAlways bool
}

// shrinkCount is the elements of each all-reduce (1 MiB of float32).
const shrinkCount = 1 << 18

// shrinkValues is world rank w's input: distinct per rank, its sums exact
// in float32.
func shrinkValues(w int) []float32 {
	v := make([]float32, shrinkCount)
	for i := range v {
		v[i] = float32((w+1)*1000 + i%17)
	}
	return v
}

// TestShrinkRankProcess is one rank: it joins, then all-reduces its values
// in a loop, checking each result against the sum over the group's
// members and printing "STEP <epoch> <unix ns>"; when an all-reduce fails
// with ErrPeerLost (or ErrStale: a peer shrank first) it prints "LOST
// <unix ns>", shrinks the group ("SHRUNK <epoch> <size> <unix ns>
// <members>") and goes on, until it has completed plan.After all-reduces
// at epoch 1; then it meets the other survivors at a barrier and prints
// "DONE". The killed rank prints steps until it dies; the stopped one,
// resumed, prints "EVICTED <error>" when its Shrink says it was left out.
func TestShrinkRankProcess(t *testing.T) {
	raw := os.Getenv(envShrinkRank)
	if raw == "" {
		t.Skip("run by TestShrinkAcrossProcesses as a rank's process")
	}
	var plan shrinkPlan
	if err := json.Unmarshal([]byte(raw), &plan); err != nil {
		t.Fatal(err)
	}
	rt := testenv.Runtime(t)
	g, err := Join(testenv.Ctx(t, 60*time.Second), rt, plan.Join, collectives.WithTimeout(30*time.Second),
		collectives.WithDataPath(collectives.DataPathStaged))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = g.Close() }()
	s := testenv.Stream(t, rt, testenv.Device(t))
	me := plan.Join.Rank
	counted := uint64(1) // the epoch whose all-reduces count
	switch {
	case plan.GrowAlways:
		counted = 0
	case plan.Grow:
		counted = 2
	}
	if g.Epoch() > 0 {
		fmt.Printf("REJOINED %d %d %d\n", g.Epoch(), g.Size(), time.Now().UnixNano())
	}
	giveUp := time.Now().Add(2 * time.Minute) // the parent kills a rank long before
	for after := 0; after < plan.After; {
		if time.Now().After(giveUp) {
			t.Fatalf("rank %d: no loss to shrink after, or no growth", me)
		}
		if plan.Grow && g.Epoch() == 1 || plan.GrowAlways {
			ng, err := g.Grow(testenv.Ctx(t, 30*time.Second))
			if err != nil {
				t.Fatalf("rank %d: grow: %v", me, err)
			}
			if ng != g {
				g = ng
				fmt.Printf("GROWN %d %d %d %v\n", g.Epoch(), g.Size(), time.Now().UnixNano(), g.Members())
			}
		}
		err := shrinkStep(testenv.Ctx(t, 60*time.Second), s, g, me)
		if err == nil {
			fmt.Printf("STEP %d %d\n", g.Epoch(), time.Now().UnixNano())
			if g.Epoch() == counted {
				after++
			}
			continue
		}
		lost := errors.Is(err, collectives.ErrPeerLost) || errors.Is(err, collectives.ErrStale) || errors.Is(err, collectives.ErrEvicted)
		if !lost || g.Epoch() != 0 {
			t.Fatalf("rank %d epoch %d: %v", me, g.Epoch(), err)
		}
		fmt.Printf("LOST %d\n", time.Now().UnixNano())
		ng, err := g.Shrink(testenv.Ctx(t, 60*time.Second))
		if errors.Is(err, collectives.ErrEvicted) { // the survivors went on without this rank
			fmt.Printf("EVICTED %v\n", err)
			return
		}
		if err != nil {
			t.Fatalf("rank %d: shrink: %v", me, err)
		}
		_ = g.Close() // its stream and buffers; the transport is ng's
		g = ng
		fmt.Printf("SHRUNK %d %d %d %v\n", g.Epoch(), g.Size(), time.Now().UnixNano(), g.Members())
	}
	if err := g.Barrier(testenv.Ctx(t, 60*time.Second)); err != nil {
		t.Fatalf("rank %d: the last barrier: %v", me, err)
	}
	fmt.Println("DONE")
	// Linger before the connections close: a rank whose barrier ended may
	// still owe a peer its last message, and a process that exits with
	// unread bytes (a peer's heartbeat) resets its connections, which can
	// lose that message on a loaded machine. The parent kills this process
	// once every rank said DONE.
	time.Sleep(5 * time.Second)
}

// shrinkStep all-reduces world rank me's values on g and checks the sum
// over g's members exactly.
func shrinkStep(ctx context.Context, s *streams.GPU, g *collectives.Group, me int) error {
	x, err := array.FromSlice(s, shrinkValues(me))
	if err != nil {
		return err
	}
	y, err := g.AllReduce(s, x, collectives.Sum)
	if err != nil {
		return err
	}
	got, err := array.ToSlice[float32](ctx, y)
	if err != nil {
		return err
	}
	want := make([]float32, shrinkCount)
	for _, m := range g.Members() {
		for i, v := range shrinkValues(m) {
			want[i] += v
		}
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("epoch %d members %v: a wrong sum (%v..., want %v...)", g.Epoch(), g.Members(), got[:3], want[:3])
	}
	return nil
}

// TestShrinkAcrossProcesses: 4 rank processes all-reduce in a loop over
// TCP, and over shared memory; one is killed with SIGKILL; the 3
// survivors shrink and complete exact all-reduces at epoch 1. The time
// from the kill to the survivors' next completed all-reduce is logged
// (not asserted: the machine may be loaded).
func TestShrinkAcrossProcesses(t *testing.T) {
	for _, carrier := range []string{"tcp", "shm"} {
		t.Run(carrier, func(t *testing.T) {
			outs, procs, _ := startShrinkRanks(t, carrier, 0, 5, false)
			killed := time.Now()
			if err := procs[shrinkVictim].Kill(); err != nil {
				t.Fatal(err)
			}
			lost, shrunk, next := survived(t, outs, killed)
			t.Logf("%s: from the kill to the failed all-reduce %v, to the shrunk group %v, to the next completed all-reduce (1 MiB, 3 ranks) %v (slowest survivor %v); an all-reduce of 4 ranks before took %v",
				carrier, lost, shrunk, next, slices.Max(next), outs[0].stepTime())
		})
	}
}

// TestShrinkEvictsAPausedRank: a rank process stopped (SIGSTOP) for
// longer than the peer timeout is lost by the others, who shrink and go
// on without it; resumed, it learns that it was dropped: its Shrink fails
// with ErrEvicted.
func TestShrinkEvictsAPausedRank(t *testing.T) {
	for _, carrier := range []string{"tcp", "shm"} {
		t.Run(carrier, func(t *testing.T) {
			// The default peer timeout, not less: under -race on a 2-core
			// machine a live survivor went unheard by another for 3 s and,
			// once, for 6 s over TCP while the stopped rank held up their
			// all-reduce (seen in CI; not reproduced in 6 runs beside two
			// busy loops), and was dropped with the stopped rank.
			const peerTimeout = DefaultPeerTimeout
			outs, procs, _ := startShrinkRanks(t, carrier, peerTimeout, 15, false)
			stopped := time.Now()
			if err := procs[shrinkVictim].Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			for r, o := range outs {
				if r != shrinkVictim && !o.await("STEP 1 ", 1, 2*time.Minute) {
					_ = procs[shrinkVictim].Signal(syscall.SIGCONT)
					t.Fatalf("rank %d did not go on without the stopped rank:\n%s", r, o.text())
				}
			}
			if err := procs[shrinkVictim].Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if o := outs[shrinkVictim]; !o.await("EVICTED ", 1, time.Minute) {
				t.Fatalf("the resumed rank was not evicted:\n%s", o.text())
			}
			lost, shrunk, next := survived(t, outs, stopped)
			t.Logf("%s: stopped past a peer timeout of %v: to the failed all-reduce %v, to the shrunk group %v, to the next all-reduce %v; the resumed rank: %s",
				carrier, peerTimeout, lost, shrunk, next, strings.Join(outs[shrinkVictim].first("EVICTED "), " "))
		})
	}
}

// shrinkVictim is the rank the Shrink tests kill or stop.
const shrinkVictim = 3

// startShrinkRanks starts 4 rank processes linked by carrier (with
// peerTimeout, if not 0), each to complete after all-reduces at epoch 1,
// and returns once each has completed two at epoch 0.
func startShrinkRanks(t *testing.T, carrier string, peerTimeout time.Duration, after int, grow bool) ([]*shrinkOutput, []*os.Process, []shrinkPlan) {
	t.Helper()
	const n = 4
	coord := freeAddr(t) // the others listen where the system puts them: no port of theirs can be taken meanwhile
	secret := []byte("shrink-test-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	outs := make([]*shrinkOutput, n)
	var procs []*os.Process
	var plans []shrinkPlan
	for r := range n {
		plan := shrinkPlan{Join: JoinConfig{Rank: r, Size: n, Coordinator: coord, Secret: secret,
			Run: "shrink-" + carrier, Transport: carrier, PeerTimeout: peerTimeout}, After: after, Grow: grow}
		plans = append(plans, plan)
		cmd, lines := startChild(t, "TestShrinkRankProcess", envShrinkRank, plan)
		procs = append(procs, cmd.Process)
		outs[r] = collect(lines)
	}
	for r, o := range outs { // every rank is in the loop
		if !o.await("STEP 0", 2, 90*time.Second) {
			t.Fatalf("rank %d did not all-reduce:\n%s", r, o.text())
		}
	}
	return outs, procs, plans
}

// survived checks that every rank but the victim shrank to epoch 1 with
// members [0 1 2] and finished, and returns, per survivor, the times from
// since to its failed all-reduce, its shrunk group and its next completed
// all-reduce.
func survived(t *testing.T, outs []*shrinkOutput, since time.Time) (lost, shrunk, next []time.Duration) {
	t.Helper()
	for r, o := range outs {
		if r == shrinkVictim {
			continue
		}
		if !o.await("DONE", 1, 2*time.Minute) {
			t.Fatalf("rank %d did not finish:\n%s", r, o.text())
		}
		sh := o.first("SHRUNK ")
		if sh == nil || sh[0] != "1" || sh[1] != "3" || strings.Join(sh[3:], " ") != "[0 1 2]" {
			t.Fatalf("rank %d: want SHRUNK 1 3 <ns> [0 1 2]:\n%s", r, o.text())
		}
		st := o.first("STEP 1 ")
		if st == nil {
			t.Fatalf("rank %d: no all-reduce at epoch 1:\n%s", r, o.text())
		}
		if l := o.first("LOST "); l != nil {
			lost = append(lost, sinceKill(t, since, l[0]))
		}
		shrunk = append(shrunk, sinceKill(t, since, sh[2]))
		next = append(next, sinceKill(t, since, st[0]))
	}
	return lost, shrunk, next
}

// sinceKill is the time from killed to the unix ns ts a rank printed.
func sinceKill(t *testing.T, killed time.Time, ts string) time.Duration {
	t.Helper()
	ns, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, ns).Sub(killed).Round(time.Millisecond)
}

// shrinkOutput gathers one rank process's output lines as they come.
type shrinkOutput struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced at each line
	ended bool
}

func collect(lines <-chan string) *shrinkOutput {
	o := &shrinkOutput{more: make(chan struct{})}
	go func() {
		for l := range lines {
			o.mu.Lock()
			o.lines = append(o.lines, l)
			close(o.more)
			o.more = make(chan struct{})
			o.mu.Unlock()
		}
		o.mu.Lock()
		o.ended = true
		close(o.more)
		o.mu.Unlock()
	}()
	return o
}

// await waits up to d for count lines starting with prefix.
func (o *shrinkOutput) await(prefix string, count int, d time.Duration) bool {
	deadline := time.After(d)
	for {
		o.mu.Lock()
		k := 0
		for _, l := range o.lines {
			if strings.HasPrefix(l, prefix) {
				k++
			}
		}
		more, ended := o.more, o.ended
		o.mu.Unlock()
		if k >= count {
			return true
		}
		if ended {
			return false
		}
		select {
		case <-more:
		case <-deadline:
			return false
		}
	}
}

// first is the fields after prefix of the first line starting with it.
func (o *shrinkOutput) first(prefix string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.lines {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// stepTime is the median time between the rank's epoch-0 steps.
func (o *shrinkOutput) stepTime() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var at []int64
	for _, l := range o.lines {
		if rest, ok := strings.CutPrefix(l, "STEP 0 "); ok {
			ns, _ := strconv.ParseInt(rest, 10, 64)
			at = append(at, ns)
		}
	}
	var d []time.Duration
	for i := 1; i < len(at); i++ {
		d = append(d, time.Duration(at[i]-at[i-1]))
	}
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2].Round(time.Millisecond)
}

func (o *shrinkOutput) text() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.lines, "\n")
}
