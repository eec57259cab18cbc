package algo_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/algo"
)

func TestTopologyGroupsRanksByHost(t *testing.T) {
	topo, err := algo.NewTopology([]string{"b", "a", "b", "c", "a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if topo.Size() != 6 || topo.Hosts() != 3 {
		t.Fatalf("%v: size %d hosts %d, want 6 and 3", topo, topo.Size(), topo.Hosts())
	}
	// Hosts in the order of their lowest rank: b (0), a (1), c (3).
	want := [][]int{{0, 2, 5}, {1, 4}, {3}}
	for h, rs := range want {
		if got := topo.Ranks(h); !slices.Equal(got, rs) {
			t.Fatalf("host %d: ranks %v, want %v", h, got, rs)
		}
		if topo.Leader(h) != rs[0] {
			t.Fatalf("host %d: leader %d, want %d", h, topo.Leader(h), rs[0])
		}
		for j, r := range rs {
			if topo.Host(r) != h || topo.Local(r) != j {
				t.Fatalf("rank %d: host %d local %d, want %d and %d", r, topo.Host(r), topo.Local(r), h, j)
			}
		}
	}
	if got := topo.Column(1); !slices.Equal(got, []int{2, 4}) {
		t.Fatalf("column 1: %v, want [2 4] (host c has no local rank 1)", got)
	}
	if !topo.Spans() || topo.Even() != 0 {
		t.Fatalf("spans %v even %d, want true and 0", topo.Spans(), topo.Even())
	}
}

func TestTopologySpansAndEven(t *testing.T) {
	cases := []struct {
		hosts []string
		spans bool
		even  int
	}{
		{[]string{"a"}, false, 1},
		{[]string{"a", "a", "a"}, false, 3},     // one host
		{[]string{"a", "b", "c"}, false, 1},     // one rank per host
		{[]string{"a", "a", "b", "b"}, true, 2}, // 2 x 2
		{[]string{"a", "b", "a", "b"}, true, 2}, // 2 x 2, interleaved
		{[]string{"a", "a", "b", "a"}, true, 0}, // 3 + 1
		{[]string{"x", "x", "y", "y", "z", "z"}, true, 2},
	}
	for _, c := range cases {
		topo, err := algo.NewTopology(c.hosts)
		if err != nil {
			t.Fatal(err)
		}
		if topo.Spans() != c.spans || topo.Even() != c.even {
			t.Errorf("%v: spans %v even %d, want %v and %d", c.hosts, topo.Spans(), topo.Even(), c.spans, c.even)
		}
	}
}

// The fingerprint depends on the grouping only: renaming the hosts keeps
// it, regrouping the ranks changes it.
func TestTopologyFingerprint(t *testing.T) {
	fp := func(hosts ...string) uint32 {
		t.Helper()
		topo, err := algo.NewTopology(hosts)
		if err != nil {
			t.Fatal(err)
		}
		return topo.Fingerprint()
	}
	if fp("a", "a", "b", "b") != fp("n1", "n1", "n2", "n2") {
		t.Error("renamed hosts changed the fingerprint")
	}
	for _, other := range [][]string{{"a", "b", "a", "b"}, {"a", "a", "a", "b"}, {"a", "a", "b", "b", "b"}, {"a", "a", "b"}} {
		if fp("a", "a", "b", "b") == fp(other...) {
			t.Errorf("%v has the fingerprint of [a a b b]", other)
		}
	}
}

func TestTopologyRefusesMissingIdentities(t *testing.T) {
	for _, hosts := range [][]string{nil, {}, {"a", ""}} {
		if _, err := algo.NewTopology(hosts); !errors.Is(err, algo.ErrBadArgument) {
			t.Errorf("%q: got %v, want ErrBadArgument", hosts, err)
		}
	}
}
