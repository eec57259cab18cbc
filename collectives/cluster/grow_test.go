package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/actors/remoting"
	"github.com/choreo-gpu/choreo/internal/errs"
)

// TestGrowAcrossProcesses: 4 rank processes all-reduce in a loop, over
// TCP and over shared memory; one is killed with SIGKILL; the 3 survivors
// shrink, and call Grow before each step; a replacement process started
// with the lost rank's configuration joins through Grow, and the 4 go on
// at epoch 2 with exact all-reduces. The times from the kill to the
// shrunk and the grown group are logged (not asserted: the machine may be
// loaded).
func TestGrowAcrossProcesses(t *testing.T) {
	for _, carrier := range []string{"tcp", "shm"} {
		t.Run(carrier, func(t *testing.T) {
			shrunk, grown := growBack(t, carrier, 0)
			t.Logf("%s: from the kill to the shrunk group %v, to the grown group of 4 %v (slowest %v)",
				carrier, shrunk, grown, slices.Max(grown))
		})
	}
}

// TestGrowWaitsForAStalledSurvivor: the false-positive twin of growing
// back: a survivor stopped (SIGSTOP) for 2 s, well inside the peer
// timeout, right after the kill is alive, and no clock leaves it out:
// the others wait for its Shrink and its Grow, and the 4 ranks, it
// included, go on at epoch 2.
func TestGrowWaitsForAStalledSurvivor(t *testing.T) {
	shrunk, grown := growBack(t, "tcp", 2*time.Second)
	t.Logf("rank 1 stopped 2 s after the kill: from the kill to the shrunk group %v, to the grown group of 4 %v",
		shrunk, grown)
}

// growBack starts 4 rank processes linked by carrier that call Grow once
// shrunk, kills one, stops rank 1 for stall (none if 0), starts a
// replacement for the killed rank, and checks that every survivor shrank
// to epoch 1 and grew back to the 4 ranks at epoch 2, the replacement
// joining there, all finishing; it returns, per survivor, the times from
// the kill to its shrunk and its grown group.
func growBack(t *testing.T, carrier string, stall time.Duration) (shrunk, grown []time.Duration) {
	t.Helper()
	outs, procs, plans := startShrinkRanks(t, carrier, 0, 5, true)
	killed := time.Now()
	if err := procs[shrinkVictim].Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = procs[shrinkVictim].Wait()
	if stall > 0 {
		if err := procs[1].Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		resume := time.AfterFunc(stall, func() { _ = procs[1].Signal(syscall.SIGCONT) })
		t.Cleanup(func() {
			if resume.Stop() {
				_ = procs[1].Signal(syscall.SIGCONT)
			}
		})
	}
	_, lines := startChild(t, "TestShrinkRankProcess", envShrinkRank, plans[shrinkVictim])
	back := collect(lines)
	if !back.await("DONE", 1, 2*time.Minute) {
		for r, o := range outs {
			t.Logf("rank %d:\n%s", r, o.text())
		}
		t.Fatalf("the replacement did not finish:\n%s", back.text())
	}
	if rj := back.first("REJOINED "); rj == nil || rj[0] != "2" || rj[1] != "4" {
		t.Fatalf("the replacement: want REJOINED 2 4:\n%s", back.text())
	}
	for r, o := range outs {
		if r == shrinkVictim {
			continue
		}
		if !o.await("DONE", 1, 2*time.Minute) {
			t.Fatalf("rank %d did not finish:\n%s", r, o.text())
		}
		sh, gr := o.first("SHRUNK "), o.first("GROWN ")
		if sh == nil || sh[0] != "1" || sh[1] != "3" {
			t.Fatalf("rank %d: want SHRUNK 1 3:\n%s", r, o.text())
		}
		if gr == nil || gr[0] != "2" || gr[1] != "4" || strings.Join(gr[3:], " ") != "[0 1 2 3]" {
			t.Fatalf("rank %d: want GROWN 2 4 <ns> [0 1 2 3]:\n%s", r, o.text())
		}
		shrunk = append(shrunk, sinceKill(t, killed, sh[2]))
		grown = append(grown, sinceKill(t, killed, gr[2]))
	}
	return shrunk, grown
}

// TestGrowWithNothingLost: Grow's twin: 4 rank processes call Grow before
// each of their all-reduces, and no rank is lost: each Grow returns the
// group itself, and the ranks finish at epoch 0.
func TestGrowWithNothingLost(t *testing.T) {
	coord := freeAddr(t)
	secret := []byte("grow-test-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	const n = 4
	outs := make([]*shrinkOutput, n)
	for r := range n {
		plan := shrinkPlan{Join: JoinConfig{Rank: r, Size: n, Coordinator: coord, Secret: secret, Run: "grow-none"},
			After: 5, GrowAlways: true}
		_, lines := startChild(t, "TestShrinkRankProcess", envShrinkRank, plan)
		outs[r] = collect(lines)
	}
	for r, o := range outs {
		if !o.await("DONE", 1, 2*time.Minute) {
			t.Fatalf("rank %d did not finish:\n%s", r, o.text())
		}
		if o.first("GROWN ") != nil || o.first("STEP 1") != nil {
			t.Fatalf("rank %d grew or moved on with nothing lost:\n%s", r, o.text())
		}
	}
}

// TestRendezvousKeepsAHeldRank: a second process that says hello for a
// rank whose process is alive in the formed group waits to take the rank
// when the group grows back, and, since the rank is never lacking, fails
// at its deadline with ErrTimeout saying so; the rank's own process is
// neither displaced nor reported lost.
func TestRendezvousKeepsAHeldRank(t *testing.T) {
	rt := sharedRuntime(t)
	coord := remoting.Of(rt).Address()
	n, err := Start(rt, Spec{Rank: 0, Size: 2, Run: "held", Coordinator: coord, Data: "d0:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close("test over")
	spec := Spec{Rank: 1, Size: 2, Run: "held", Coordinator: coord, Data: "d1:1"}
	_, lines := startPeer(t, peerSpec{Spec: spec, Listen: "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	roster, err := n.Rendezvous(ctx)
	if err != nil {
		t.Fatal(err)
	}
	awaitLine(t, lines, "ROSTER ", 30*time.Second)
	lost := make(chan string, 2)
	n.Watch(roster, func(rank int, cause error) { lost <- fmt.Sprintf("rank %d: %v", rank, cause) })
	_, second := startPeer(t, peerSpec{Spec: spec, Listen: "127.0.0.1:0", Wait: 1500 * time.Millisecond})
	failed := awaitLine(t, second, "FAILED ", 30*time.Second)
	if !strings.Contains(failed, "had formed already") || !strings.Contains(failed, errs.ErrTimeout.Error()) {
		t.Fatalf("the second process: %s", failed)
	}
	select {
	case l := <-lost:
		t.Fatalf("a live rank was reported lost: %s", l)
	case <-time.After(500 * time.Millisecond):
	}
}
