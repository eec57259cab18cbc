package collectives_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// allReduceOn starts an all-reduce of size elements on each of ranks and
// returns each output's error.
func allReduceOn(t *testing.T, w *world, ranks []int, size func(r int) int) map[int]error {
	t.Helper()
	ctx := testenv.Ctx(t, 60*time.Second)
	ys := map[int]*array.Array{}
	for _, r := range ranks {
		x, err := array.Full(w.s[r], []int{size(r)}, gpu.Float32, 1)
		if err != nil {
			t.Fatal(err)
		}
		if ys[r], err = w.groups[r].AllReduce(w.s[r], x, collectives.Sum); err != nil {
			t.Fatal(err)
		}
	}
	errs := map[int]error{}
	for r, y := range ys {
		errs[r] = y.Wait(ctx)
	}
	return errs
}

// TestReportMissingRank: rank 3 never calls the all-reduce; the others
// fail at the group's timeout, and each one's error names the op, the
// group, the sequence number, the rank that failed first and why, and
// rank 3 as not arrived.
func TestReportMissingRank(t *testing.T) {
	const n = 4
	w := newWorld(t, n, collectives.WithTimeout(time.Second))
	errs := allReduceOn(t, w, []int{0, 1, 2}, func(int) int { return 1024 })
	for r, err := range errs {
		var oe *collectives.OpError
		if !errors.As(err, &oe) {
			t.Fatalf("rank %d: %v: no OpError", r, err)
		}
		if oe.Op != "allreduce" || oe.Group != w.groups[0].ID() || oe.Seq != 1 || oe.Rank != r {
			t.Errorf("rank %d: op %q group %d seq %d rank %d", r, oe.Op, oe.Group, oe.Seq, oe.Rank)
		}
		if !oe.MissingKnown || !slices.Equal(oe.Missing, []int{3}) {
			t.Errorf("rank %d: missing %v (known %v), want [3]", r, oe.Missing, oe.MissingKnown)
		}
		if oe.Origin < 0 || oe.Origin > 2 || oe.Cause == nil {
			t.Errorf("rank %d: origin %d cause %v", r, oe.Origin, oe.Cause)
		}
		if !errors.Is(err, collectives.ErrTimeout) {
			t.Errorf("rank %d: %v does not match ErrTimeout", r, err)
		}
		rep := oe.Report()
		for _, want := range []string{"collective failed: allreduce", "seq 1", "not arrived:  rank 3", "failed first: rank "} {
			if !strings.Contains(rep, want) {
				t.Errorf("rank %d: report lacks %q:\n%s", r, want, rep)
			}
		}
		if r == 0 {
			t.Log("\n" + rep)
		}
	}
}

// TestReportShapeMismatch: rank 2 passes half the elements; every rank's
// error is a shape mismatch whose report says every rank arrived.
func TestReportShapeMismatch(t *testing.T) {
	const n = 4
	w := newWorld(t, n)
	errs := allReduceOn(t, w, []int{0, 1, 2, 3}, func(r int) int {
		if r == 2 {
			return 512
		}
		return 1024
	})
	for r, err := range errs {
		var oe *collectives.OpError
		if !errors.As(err, &oe) {
			t.Fatalf("rank %d: %v: no OpError", r, err)
		}
		if !errors.Is(err, collectives.ErrShapeMismatch) || !errors.Is(oe.Cause, collectives.ErrShapeMismatch) {
			t.Errorf("rank %d: %v (cause %v): not a shape mismatch", r, err, oe.Cause)
		}
		if !oe.MissingKnown || len(oe.Missing) != 0 {
			t.Errorf("rank %d: missing %v (known %v), want none", r, oe.Missing, oe.MissingKnown)
		}
		rep := oe.Report()
		for _, want := range []string{"not arrived:  none", "shape mismatch", "count=512"} {
			if !strings.Contains(rep, want) {
				t.Errorf("rank %d: report lacks %q:\n%s", r, want, rep)
			}
		}
		if r == 0 {
			t.Log("\n" + rep)
		}
	}
}
