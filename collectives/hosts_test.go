package collectives_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/collectives/algo"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// hostLayouts are fake assignments of in-process ranks to hosts: even
// ones, and 3+1, whose all-reduce, all-gather and reduce-scatter stay flat.
var hostLayouts = map[string][]string{
	"2x2": {"a", "a", "b", "b"},
	"2x4": {"a", "a", "a", "a", "b", "b", "b", "b"},
	"3x2": {"a", "b", "c", "a", "b", "c"},
	"3+1": {"a", "a", "b", "a"},
}

// TestHostsEveryOp: groups told their ranks' hosts, the two levels forced,
// run every op on the host path, checked against the reference (the
// levels' own matrix, against the flat ring bit for bit, is algo's).
func TestHostsEveryOp(t *testing.T) {
	for name, hosts := range hostLayouts {
		n := len(hosts)
		w := newWorld(t, n, collectives.WithHosts(hosts), collectives.WithDataPath(collectives.DataPathStaged),
			collectives.WithAlgorithm(algo.WithAlgorithm(algo.Hierarchical)), collectives.WithTimeout(60*time.Second))
		for _, dt := range []gpu.DType{gpu.Float32, gpu.BFloat16, gpu.Int32, gpu.Uint8} {
			for _, count := range []int{1, 7, 1001} {
				t.Run(fmt.Sprintf("%s/%s/%d", name, dt, count), func(t *testing.T) {
					deviceCase(t, w, n, dt, count)
				})
			}
		}
	}
}

// levelWatch notes whether a message carried a step of a hierarchical
// level (from 1<<12 up), under the group's transport.
type levelWatch struct {
	transport.Transport
	seen *atomic.Bool
}

func (l levelWatch) Send(ctx context.Context, dst int, tag transport.Tag, data []byte) error {
	if tag.Step&(transport.MaxStep-1) >= 1<<12 {
		l.seen.Store(true)
	}
	return l.Transport.Send(ctx, dst, tag, data)
}

// TestHostsReachTheAlgorithms: a group made by New on a message transport
// with WithHosts runs a large all-reduce in levels and a small one flat,
// and its subgroups carry their members' hosts: one spanning both hosts
// runs in levels, one on a single host flat.
func TestHostsReachTheAlgorithms(t *testing.T) {
	hosts := hostLayouts["2x4"]
	n := len(hosts)
	w := newWorld(t, n)
	var seen atomic.Bool
	ts := transport.NewLocal(n)
	for r := range n {
		g, err := collectives.New(w.rt, levelWatch{ts[r], &seen}, 91, collectives.WithHosts(hosts),
			collectives.WithDataPath(collectives.DataPathStaged), collectives.WithTimeout(60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		w.groups[r] = g
	}
	const large = algo.DefaultHierBytes/4 + 1 // float32 elements
	levels := func(what string, w *world, count int, want bool) {
		t.Helper()
		seen.Store(false)
		runAllReduce(t, w, gpu.Float32, collectives.Sum, count)
		if seen.Load() != want {
			t.Fatalf("%s: ran in levels: %v, want %v", what, seen.Load(), want)
		}
	}
	levels("large", w, large, true)
	levels("small", w, 1000, false)

	split := func(color func(r int) int) []*world {
		subs := map[int]*world{}
		var worlds []*world
		gs := make([]*collectives.Group, n)
		errs := make(chan error, n)
		for r := range n {
			go func() {
				var err error
				gs[r], err = w.groups[r].Split(color(r), r)
				errs <- err
			}()
		}
		for range n {
			if err := testenv.Recv(t, errs, 60*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		for r := range n {
			c := color(r)
			if subs[c] == nil {
				subs[c] = &world{rt: w.rt, dev: w.dev}
				worlds = append(worlds, subs[c])
			}
			subs[c].groups = append(subs[c].groups, gs[r])
			subs[c].s = append(subs[c].s, w.s[r])
		}
		return worlds
	}
	for _, sub := range split(func(r int) int { return r % 2 }) { // hosts a a b b
		levels("subgroup across hosts", sub, large, true)
	}
	for _, sub := range split(func(r int) int { return r / 4 }) { // hosts a a a a
		levels("subgroup on one host", sub, large, false)
	}
}

func TestHostsOfAnotherSize(t *testing.T) {
	rt := testenv.Runtime(t)
	if _, err := collectives.Local(rt, 4, collectives.WithHosts([]string{"a", "a", "b"})); !errors.Is(err, collectives.ErrBadArgument) {
		t.Fatalf("3 hosts for 4 ranks: got %v, want ErrBadArgument", err)
	}
}
