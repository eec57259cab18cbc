package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestOpFloors: each op's floor is its fewest bytes over the copy rate, in
// the bench's busbw convention; checked against the bytes counted by hand
// for 2 and 4 ranks.
func TestOpFloors(t *testing.T) {
	const c = 1e12
	for _, tc := range []struct {
		op   string
		n    int
		want float64 // busbw = algbw x factor, algbw = s / (bytes moved / c)
	}{
		{"allreduce", 2, c / (2 * 2) * 2 * 1 / 2}, // 4s moved
		{"allreduce", 4, c / (2 * 4) * 2 * 3 / 4}, // 8s moved
		{"allgather", 4, c / 5 * 3 / 4},           // s read, 4s written
		{"reducescatter", 2, c / 3 * 1 / 2},       // 2s read, s written
		{"broadcast", 4, c / 5},                   // s read, 4s written
		{"alltoall", 4, c / 8 * 3 / 4},            // 4s read, 4s written
		{"allreduce_inplace", 4, c / (2 * 4) * 2 * 3 / 4},
	} {
		got, _, ok := opFloor(tc.op, tc.n, c)
		if !ok || math.Abs(got-tc.want) > 1e-6*c {
			t.Errorf("%s n=%d: floor %v (ok %v); want %v", tc.op, tc.n, got, ok, tc.want)
		}
	}
	if _, _, ok := opFloor("sendrecv", 2, c); ok {
		t.Error("sendrecv has a device floor here")
	}
	var out bytes.Buffer
	floorLines(&out, []string{"allgather", "sendrecv"}, largestRows{size: 64 << 20, busbw: map[string]float64{"allgather": 100, "sendrecv": 5}}, 2, 1.2e12)
	if s := out.String(); s != "allgather 64 MiB: floor (n-1)/(n(n+1)) x C = 200.0 GB/s; busbw 100.0 GB/s = 50% of it\n" {
		t.Errorf("floor lines: %q", s)
	}
	out.Reset()
	floorLines(&out, []string{"allgather"}, largestRows{size: 1 << 20, busbw: map[string]float64{"allgather": 100}}, 2, 1e12)
	if strings.TrimSpace(out.String()) != "" {
		t.Errorf("floor lines below 64 MiB: %q", out.String())
	}
}
