package main

import (
	"errors"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
)

// A group asks to grow back only while it lacks ranks and still has the
// world's rank 0.
func TestElasticWantsGrowth(t *testing.T) {
	for _, c := range []struct {
		members []int
		size    int
		want    bool
	}{
		{[]int{0, 1, 2, 3}, 4, false},
		{[]int{0, 1, 3}, 4, true},
		{[]int{0}, 4, true},
		{[]int{1, 2, 3}, 4, false}, // rank 0 lost: nobody decides
		{nil, 4, false},
	} {
		if got := wantsGrowth(c.members, c.size); got != c.want {
			t.Errorf("wantsGrowth(%v, %d) = %v, want %v", c.members, c.size, got, c.want)
		}
	}
}

// soaksOf is one soak per held rank of an in-process world of n ranks,
// each at step k, as the elastic soak makes them.
func soaksOf(t *testing.T, n int) (*world, []*soak) {
	t.Helper()
	w, err := newLocalWorld(zap.NewNop(), "sim", n, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	f := &runFlags{Steps: 20, Timeout: 20 * time.Second}
	var sks []*soak
	for i, g := range w.groups {
		sk := &soak{f: f, log: zap.NewNop(), dt: gpu.Int32, elems: 16, me: i, g: g, s: w.s[i], start: time.Now(), world: n}
		sk.growth.known = true
		sks = append(sks, sk)
	}
	return w, sks
}

// After a growth every member takes rank 0's step, the replacement (which
// knows no step) included, and the next step's check passes on every
// rank; the twin: a whole group that did not grow neither asks nor
// changes its step.
func TestElasticGrowBackTakesRankZerosStep(t *testing.T) {
	w, sks := soaksOf(t, 3)
	ks := []int{7, 7, 0}
	sks[2].rejoin, sks[2].growth.known = true, false
	for _, sk := range sks {
		sk.growth.fresh = true
	}
	err := w.each(func(i int) error {
		k, err := sks[i].growBack(ks[i])
		if err == nil {
			ks[i] = k
			_, _, err = sks[i].step(k)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, sk := range sks {
		if ks[i] != 7 || sk.passed != 1 || sk.checks != 1 || !sk.growth.known || sk.growth.fresh || sk.growth.asks != 0 {
			t.Errorf("rank %d: step %d, checks %d/%d, known %v, fresh %v, asks %d; want step 7, 1/1 checks, known, not fresh, no ask",
				i, ks[i], sk.passed, sk.checks, sk.growth.known, sk.growth.fresh, sk.growth.asks)
		}
	}
	err = w.each(func(i int) error {
		k, err := sks[i].growBack(8)
		if err == nil && k != 8 {
			t.Errorf("rank %d: a whole group's step 8 became %d", i, k)
		}
		return err
	})
	if err != nil || sks[0].growth.asks != 0 || sks[0].g != w.groups[0] {
		t.Errorf("a whole group: %v, asks %d, group changed %v; want no ask", err, sks[0].growth.asks, sks[0].g != w.groups[0])
	}
}

// A group that cannot grow back (an in-process one: Join did not make it)
// stops asking after the first ask and goes on as it was.
func TestElasticGrowUnsupportedStopsAsking(t *testing.T) {
	w, sks := soaksOf(t, 2)
	err := w.each(func(i int) error {
		if err := sks[i].ask(); err != nil {
			return err
		}
		_, _, err := sks[i].step(3)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, sk := range sks {
		if !sk.growth.off || sk.growth.asks != 1 || sk.growth.grown != 0 || sk.g != w.groups[i] || sk.passed != 1 {
			t.Errorf("rank %d: off %v, asks %d, grown %d, same group %v, checks passed %d; want off after one ask, the group kept and its step passed",
				i, sk.growth.off, sk.growth.asks, sk.growth.grown, sk.g == w.groups[i], sk.passed)
		}
	}
}

// A replacement that cannot learn the step (rank 0 gone before it said)
// ends its soak with the lost-peer exit status instead of guessing.
func TestElasticReplacementWithoutRankZero(t *testing.T) {
	w, sks := soaksOf(t, 2)
	sks[1].rejoin, sks[1].growth.known, sks[1].growth.fresh = true, false, true
	if err := w.groups[0].Close(); err != nil {
		t.Fatal(err)
	}
	_, err := sks[1].growBack(0)
	var xe *exitError
	if !errors.As(err, &xe) || xe.code != exitPeerLost || !errors.Is(err, collectives.ErrPeerLost) || sks[1].growth.known {
		t.Fatalf("growBack: %v; want exit status %d wrapping ErrPeerLost, the step still unknown", err, exitPeerLost)
	}
}

// A rank the launcher started again does not trace (its Join gives it a
// group whose members are past the start, where traced ranks align their
// clocks); the twin: a first start keeps its trace.
func TestElasticRestartedRankDoesNotTrace(t *testing.T) {
	for _, c := range []struct {
		count string
		trace bool
	}{{"1", false}, {"0", true}, {"", true}} {
		t.Setenv("CHOREO_RESTART_COUNT", c.count)
		t.Setenv(envTraceDir, t.TempDir())
		cmd := &nodeRunCmd{obsFlags: obsFlags{Trace: "soak.json"}}
		if err := cmd.restartedUntraced(zap.NewNop()); err != nil {
			t.Fatal(err)
		}
		if traced := cmd.Trace != "" && os.Getenv(envTraceDir) != ""; traced != c.trace {
			t.Errorf("CHOREO_RESTART_COUNT=%q: --trace %q, %s %q; want tracing %v", c.count, cmd.Trace, envTraceDir, os.Getenv(envTraceDir), c.trace)
		}
	}
}
