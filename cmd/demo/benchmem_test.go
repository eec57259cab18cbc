package main

import "testing"

// TestResolveMaxSize: left at 0, --max-size is 64 MiB for launched ranks
// and a lone in-process pair, and for more in-process ranks the largest
// size of the sweep whose footprint fits the budget (4 ranks: 16 MiB);
// one given is kept.
func TestResolveMaxSize(t *testing.T) {
	for _, tc := range []struct {
		inproc bool
		n      int
		given  sizeFlag
		want   sizeFlag
		capped bool
	}{
		{false, 8, 0, 64 << 20, false},
		{true, 2, 0, 64 << 20, false},
		{true, 4, 0, 16 << 20, true},
		{true, 8, 0, 4 << 20, true},
		{true, 4, 64 << 20, 64 << 20, false},
	} {
		f := benchFlags{MinSize: 4 << 10, Factor: 4, MaxSize: tc.given}
		f.resolveMaxSize(tc.inproc, tc.n)
		if f.MaxSize != tc.want || f.capped != tc.capped {
			t.Errorf("inproc %v, %d ranks, given %d: max %d capped %v; want %d %v", tc.inproc, tc.n, tc.given, f.MaxSize, f.capped, tc.want, tc.capped)
		}
		if tc.capped && footprint(tc.n, int(f.MaxSize)) > inprocBudget {
			t.Errorf("%d ranks at %d bytes: footprint %d over the budget", tc.n, f.MaxSize, footprint(tc.n, int(f.MaxSize)))
		}
	}
}
