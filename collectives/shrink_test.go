package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// shrinkTimeout is the groups' timeout in the Shrink tests: far longer
// than the tests wait for anything, so that a call that fails only at its
// deadline shows as a failure of the test, not as a slow pass.
const shrinkTimeout = 3 * time.Minute

// elasticWorld is an in-process world whose groups shrink: the groups of
// the current epoch (by rank), each world rank's stream, and the world's
// transports where the test made them (nil for Local's).
type elasticWorld struct {
	gs []*collectives.Group
	ss []*streams.GPU
	ts []transport.Transport
}

// worldMaker makes an n-rank world on rt.
type worldMaker struct {
	name string
	make func(t *testing.T, rt *actors.Runtime, n int, opts ...collectives.Option) ([]*collectives.Group, []transport.Transport)
}

var newIDs atomic.Uint64

// worldMakers are the in-process worlds the Shrink tests run on:
// collectives.Local's, Local's transport with nothing but the Transport
// methods (a transport that cannot retire a group), and groups over
// message-layer endpoints linked by in-memory pipes (the TCP and
// shared-memory transports' message layer).
var worldMakers = []worldMaker{
	{"local", func(t *testing.T, rt *actors.Runtime, n int, opts ...collectives.Option) ([]*collectives.Group, []transport.Transport) {
		gs, err := collectives.Local(rt, n, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return gs, nil
	}},
	{"plain", func(t *testing.T, rt *actors.Runtime, n int, opts ...collectives.Option) ([]*collectives.Group, []transport.Transport) {
		// Local's transport as a user's transport would be: no way to
		// retire a group, no windows.
		id := 1<<40 + newIDs.Add(1)
		gs := make([]*collectives.Group, n)
		ts := make([]transport.Transport, n)
		for r, lt := range transport.NewLocal(n) {
			ts[r] = plainTransport{lt}
			var err error
			if gs[r], err = collectives.New(rt, ts[r], id, opts...); err != nil {
				t.Fatal(err)
			}
		}
		return gs, ts
	}},
	{"msg", func(t *testing.T, rt *actors.Runtime, n int, opts ...collectives.Option) ([]*collectives.Group, []transport.Transport) {
		links := transporttest.Pipes(n, transporttest.PipeConfig{Window: msg.DefaultMaxBuffered})
		id := 1<<40 + newIDs.Add(1)
		gs := make([]*collectives.Group, n)
		ts := make([]transport.Transport, n)
		for r := range n {
			e, err := msg.New(msg.Config{Rank: r, Size: n, Name: "pipes", MaxBuffered: msg.DefaultMaxBuffered,
				PeerTimeout: msg.DefaultPeerTimeout, HeartbeatInterval: msg.DefaultHeartbeatInterval}, links[r])
			if err != nil {
				t.Fatal(err)
			}
			ts[r] = e
			if gs[r], err = collectives.New(rt, e, id, opts...); err != nil {
				t.Fatal(err)
			}
		}
		return gs, ts
	}},
}

// plainTransport hides every method of its transport but Transport's.
type plainTransport struct{ transport.Transport }

func newElastic(t *testing.T, mk worldMaker, n int) *elasticWorld {
	t.Helper()
	rt := testenv.Runtime(t)
	dev := testenv.Device(t)
	gs, ts := mk.make(t, rt, n, collectives.WithTimeout(shrinkTimeout), collectives.WithDataPath(collectives.DataPathStaged))
	w := &elasticWorld{gs: gs, ts: ts}
	for range n {
		w.ss = append(w.ss, testenv.Stream(t, rt, dev))
	}
	t.Cleanup(func() { // the last epoch's groups, then the first's (Close is idempotent)
		for _, g := range append(w.gs, gs...) {
			_ = g.Close()
		}
	})
	return w
}

// worldValues is world rank w's input: distinct per rank, and its sums
// exact in float32.
func worldValues(w int) []float64 {
	v := make([]float64, 1000)
	for i := range v {
		v[i] = float64((w+1)*1000 + i%17)
	}
	return v
}

// allReduceExact all-reduces each rank's world values on w.gs and checks
// that every rank got exactly the sum over the group's members.
func (w *elasticWorld) allReduceExact(t *testing.T) {
	t.Helper()
	members := w.gs[0].Members()
	want := make([]float64, 1000)
	for _, m := range members {
		for i, x := range worldValues(m) {
			want[i] += x
		}
	}
	ys := make([]*array.Array, len(w.gs))
	for r, g := range w.gs {
		if g.Rank() != r || g.Size() != len(w.gs) || !slices.Equal(g.Members(), members) {
			t.Fatalf("group rank %d: rank %d of %d, members %v (rank 0's %v)", r, g.Rank(), g.Size(), g.Members(), members)
		}
		s := w.ss[members[r]]
		var err error
		if ys[r], err = g.AllReduce(s, fromFloat64(t, s, gpu.Float32, worldValues(members[r])), collectives.Sum); err != nil {
			t.Fatal(err)
		}
	}
	for r, y := range ys {
		got, err := array.ToFloat64(testenv.Ctx(t, 60*time.Second), y)
		if err != nil {
			t.Fatalf("epoch %d rank %d: %v", w.gs[r].Epoch(), r, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("epoch %d rank %d (members %v): got %v..., want %v...", w.gs[r].Epoch(), r, members, got[:4], want[:4])
		}
	}
}

// shrinkAll calls Shrink on each of gs at once (rank r after delay(r)),
// bounded by a minute, and returns what each got.
func shrinkAll(gs []*collectives.Group, delay func(r int) time.Duration) ([]*collectives.Group, []error) {
	out := make([]*collectives.Group, len(gs))
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for r, g := range gs {
		wg.Go(func() {
			if delay != nil {
				time.Sleep(delay(r))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out[r], errs[r] = g.Shrink(ctx)
		})
	}
	wg.Wait()
	return out, errs
}

// loseRank closes rank lost's group while the others are inside an
// all-reduce, and checks that theirs fail with ErrPeerLost (not at the
// deadline). It returns the survivors' groups.
func (w *elasticWorld) loseRank(t *testing.T, lost int) []*collectives.Group {
	t.Helper()
	var survivors []*collectives.Group
	var ys []*array.Array
	for r, g := range w.gs {
		if r == lost {
			continue
		}
		s := w.ss[g.Members()[r]]
		y, err := g.AllReduce(s, fromFloat64(t, s, gpu.Float32, make([]float64, 1000)), collectives.Sum)
		if err != nil {
			t.Fatal(err)
		}
		survivors, ys = append(survivors, g), append(ys, y)
	}
	time.Sleep(20 * time.Millisecond) // the all-reduces are under way
	if err := w.gs[lost].Close(); err != nil {
		t.Fatal(err)
	}
	for i, y := range ys {
		_, err := array.ToFloat64(testenv.Ctx(t, 60*time.Second), y)
		if !errors.Is(err, collectives.ErrPeerLost) || errors.Is(err, collectives.ErrTimeout) {
			t.Fatalf("survivor %d: %v, want ErrPeerLost (not the deadline)", survivors[i].Rank(), err)
		}
	}
	return survivors
}

// expectShrunk checks what Shrink gave the survivors: no error, ranks
// 0..n-1 in order, the epoch, the members.
func expectShrunk(t *testing.T, gs []*collectives.Group, errs []error, epoch uint64, members []int) {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("survivor %d: Shrink: %v", i, err)
		}
		g := gs[i]
		if g.Rank() != i || g.Size() != len(members) || g.Epoch() != epoch || !slices.Equal(g.Members(), members) {
			t.Fatalf("survivor %d: rank %d of %d at epoch %d, members %v; want rank %d of %d at epoch %d, members %v",
				i, g.Rank(), g.Size(), g.Epoch(), g.Members(), i, len(members), epoch, members)
		}
	}
}

// TestShrinkAfterLosses: of 4 ranks, one closes while the others are in
// an all-reduce; the 3 survivors shrink to ranks 0..2 at epoch 1 and
// all-reduce exactly the sum of their values, though the old groups were
// closed first (the new groups own the transport); calls queued on the old
// groups (a receive nobody sends to, an all-reduce only one rank made)
// fail as stale (or with the loss they met), not at the group's timeout,
// and a later call on an old group fails at once. A second loss shrinks
// the world again, to 2 ranks at epoch 2.
func TestShrinkAfterLosses(t *testing.T) {
	for _, mk := range worldMakers {
		t.Run(mk.name, func(t *testing.T) {
			w := newElastic(t, mk, 4)
			w.allReduceExact(t)
			old := w.loseRank(t, 3)
			// Calls queued before Shrink that no peer will ever match.
			s0, s1 := w.ss[0], w.ss[1]
			recv, err := old[0].Recv(s0, []int{8}, gpu.Float32, 2)
			if err != nil {
				t.Fatal(err)
			}
			extra, err := old[1].AllReduce(s1, fromFloat64(t, s1, gpu.Float32, make([]float64, 1000)), collectives.Sum)
			if err != nil {
				t.Fatal(err)
			}
			gs, errs := shrinkAll(old, nil)
			expectShrunk(t, gs, errs, 1, []int{0, 1, 2})
			_, err = array.ToFloat64(testenv.Ctx(t, 60*time.Second), recv)
			if !errors.Is(err, collectives.ErrStale) {
				t.Fatalf("a receive queued on the old group: %v, want ErrStale", err)
			}
			_, err = array.ToFloat64(testenv.Ctx(t, 60*time.Second), extra)
			if !errors.Is(err, collectives.ErrStale) && !errors.Is(err, collectives.ErrPeerLost) || errors.Is(err, collectives.ErrTimeout) {
				t.Fatalf("an all-reduce queued on the old group: %v, want ErrStale or ErrPeerLost", err)
			}
			if _, err := old[0].AllReduce(s0, fromFloat64(t, s0, gpu.Float32, []float64{1}), collectives.Sum); !errors.Is(err, collectives.ErrClosed) {
				t.Fatalf("a call on the shrunk group: %v, want ErrClosed", err)
			}
			if _, err := old[0].Shrink(context.Background()); !errors.Is(err, collectives.ErrClosed) {
				t.Fatalf("a second Shrink of the shrunk group: %v, want ErrClosed", err)
			}
			for _, g := range old {
				if err := g.Close(); err != nil {
					t.Fatal(err)
				}
			}
			w.gs = gs
			w.allReduceExact(t)

			old = w.loseRank(t, 1)
			gs, errs = shrinkAll(old, nil)
			expectShrunk(t, gs, errs, 2, []int{0, 2})
			for _, g := range old {
				_ = g.Close()
			}
			w.gs = gs
			w.allReduceExact(t)

			// A group split from a shrunk one names its ranks in the
			// first world too.
			subs := make([]*collectives.Group, len(gs))
			var wg sync.WaitGroup
			for r, g := range gs {
				wg.Go(func() { subs[len(gs)-1-r], errs[r] = g.Split(0, -r) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, g := range subs {
					_ = g.Close()
				}
			}()
			if m := subs[0].Members(); !slices.Equal(m, []int{2, 0}) || subs[0].Epoch() != 0 {
				t.Fatalf("the split group's members %v at epoch %d, want [2 0] at 0", m, subs[0].Epoch())
			}
			w.gs = subs
			w.allReduceExact(t)
			w.gs = gs
		})
	}
}

// TestShrinkWaitsForASlowSurvivor is the false-positive twin: a survivor
// that calls Shrink 2 s after the others (who wait for it meanwhile) is
// kept; so are all ranks when none was lost.
func TestShrinkWaitsForASlowSurvivor(t *testing.T) {
	for _, mk := range worldMakers {
		t.Run(mk.name, func(t *testing.T) {
			w := newElastic(t, mk, 4)
			old := w.loseRank(t, 3)
			slow := func(r int) time.Duration {
				if r == 1 {
					return 2 * time.Second
				}
				return 0
			}
			gs, errs := shrinkAll(old, slow)
			expectShrunk(t, gs, errs, 1, []int{0, 1, 2})
			w.gs = gs
			w.allReduceExact(t)
			gs, errs = shrinkAll(gs, slow) // none lost: the same ranks at the next epoch
			expectShrunk(t, gs, errs, 2, []int{0, 1, 2})
			w.gs = gs
			w.allReduceExact(t)
		})
	}
}

// TestShrinkRefusesOldMessages: a message sent with the old group's tag
// after the shrink (a late message of the old epoch) is never taken by the
// new group: its sender is refused (or nobody ever receives it), and the
// new group's all-reduces stay exact.
func TestShrinkRefusesOldMessages(t *testing.T) {
	mk := worldMakers[2] // a world whose transports the test holds
	w := newElastic(t, mk, 3)
	w.allReduceExact(t)
	oldID := w.gs[0].ID()
	gs, errs := shrinkAll(w.gs, nil)
	expectShrunk(t, gs, errs, 1, []int{0, 1, 2})
	if gs[0].ID() == oldID {
		t.Fatalf("the new epoch kept the old id %d", oldID)
	}
	w.gs = gs
	late := make(chan error, 1)
	go func() {
		// The bytes an all-reduce of the old epoch would send next.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		late <- w.ts[0].Send(ctx, 1, transport.CollTag(oldID, 2, 0, 0), make([]byte, 4000))
	}()
	for range 3 {
		w.allReduceExact(t)
	}
	if err := testenv.Recv(t, late, time.Minute); err != nil && !errors.Is(err, collectives.ErrStale) && !errors.Is(err, collectives.ErrTimeout) {
		t.Fatalf("the late message's send: %v, want ErrStale, a timeout or nil", err)
	}
	// The old epoch's tag never meets a receive of the new one: a receive
	// of it on the world's transport finds it only where the transport
	// kept it (it never retired the old group), never in a new collective.
	w.allReduceExact(t)
}

// TestShrinkEvicts: rank 0's transport loses rank 3 though both are alive
// (their link is cut), so neither can be in a group with the other: every
// rank calls Shrink, and the two that others lost get ErrEvicted while
// ranks 1 and 2 go on as a group of 2.
func TestShrinkEvicts(t *testing.T) {
	w := newElastic(t, worldMakers[2], 4)
	w.allReduceExact(t)
	w.ts[0].(*msg.Endpoint).LosePeer(3, fmt.Errorf("the test cut the link"))
	gs, errs := shrinkAll(w.gs, nil)
	for _, r := range []int{0, 3} {
		if !errors.Is(errs[r], collectives.ErrEvicted) {
			t.Fatalf("rank %d: %v, want ErrEvicted", r, errs[r])
		}
	}
	expectShrunk(t, []*collectives.Group{gs[1], gs[2]}, []error{errs[1], errs[2]}, 1, []int{1, 2})
	w.gs = []*collectives.Group{gs[1], gs[2]}
	w.allReduceExact(t)
}

// TestShrinkTimesOut: a rank that never calls Shrink (alive, so not lost)
// leaves the others' Shrink to end at their ctx with ErrTimeout.
func TestShrinkTimesOut(t *testing.T) {
	w := newElastic(t, worldMakers[0], 3)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			_, errs[r] = w.gs[r].Shrink(testenv.Ctx(t, time.Second))
		})
	}
	wg.Wait()
	for r, err := range errs {
		if !errors.Is(err, collectives.ErrTimeout) {
			t.Fatalf("rank %d: %v, want ErrTimeout", r, err)
		}
	}
}

// TestShrinkRefusesTheDevicePath: a group on the device data path does not
// shrink yet: Shrink says so at once and the group goes on.
func TestShrinkRefusesTheDevicePath(t *testing.T) {
	rt := testenv.Runtime(t)
	gs, err := collectives.Local(rt, 2, collectives.WithDataPath(collectives.DataPathDevice))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, g := range gs {
			_ = g.Close()
		}
	}()
	if _, err := gs[0].Shrink(context.Background()); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Shrink on the device path: %v, want errors.ErrUnsupported", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r, g := range gs {
		wg.Go(func() { errs[r] = g.Barrier(testenv.Ctx(t, 30*time.Second)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("the group after a refused Shrink: %v", err)
	}
}
