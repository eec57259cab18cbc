package main

import (
	"slices"
	"testing"
)

// The launcher shares the host's processors out among its ranks, at least
// one each, unless the user set GOMAXPROCS.
func TestRankProcs(t *testing.T) {
	for _, c := range []struct {
		n, cpus int
		set     string
		want    []string
	}{
		{2, 2, "", []string{"GOMAXPROCS=1"}},
		{4, 2, "", []string{"GOMAXPROCS=1"}},
		{2, 16, "", []string{"GOMAXPROCS=8"}},
		{3, 16, "", []string{"GOMAXPROCS=5"}},
		{1, 2, "", []string{"GOMAXPROCS=2"}},
		{2, 2, "2", nil},
	} {
		if got := rankProcs(c.n, c.cpus, c.set); !slices.Equal(got, c.want) {
			t.Errorf("rankProcs(%d, %d, %q) = %v, want %v", c.n, c.cpus, c.set, got, c.want)
		}
	}
}
