package main

import (
	"fmt"
	"io"
)

// opFloor is the bus bandwidth no implementation of op can beat on one
// device whose memory moves c bytes per second (read plus written), for n
// ranks each with its own output, in the bench's size and busbw
// conventions (nccl-tests'): the fewest bytes every rank's part together
// must read and write, over c. s is the size of the buffer the op's row is
// named for:
//
//   - allreduce: read n*s, write n*s; busbw (n-1)/n^2 x c.
//   - allgather (s the gathered output): read each input once (s in all),
//     write n outputs of s; busbw (n-1)/(n(n+1)) x c.
//   - reducescatter (s each rank's input): read n*s, write n blocks of s/n;
//     busbw (n-1)/(n(n+1)) x c.
//   - broadcast: read the root's s once, write n outputs; busbw c/(n+1).
//   - alltoall (s each rank's input and output): read n*s, write n*s; busbw
//     (n-1)/(2n^2) x c.
//
// ok is false for an op without a device-path floor here.
func opFloor(op string, n int, c float64) (busbw float64, formula string, ok bool) {
	f := float64(n)
	switch op {
	case "allreduce", "allreduce_inplace":
		return c * (f - 1) / (f * f), "(n-1)/n^2 x C", true
	case "allgather", "reducescatter":
		return c * (f - 1) / (f * (f + 1)), "(n-1)/(n(n+1)) x C", true
	case "broadcast":
		return c / (f + 1), "C/(n+1)", true
	case "alltoall":
		return c * (f - 1) / (2 * f * f), "(n-1)/(2n^2) x C", true
	}
	return 0, "", false
}

// floorLines prints, for each op measured at 64 MiB, its floor (opFloor,
// with the measured copy rate c) and the share of it the op reached.
func floorLines(out io.Writer, ops []string, largest largestRows, n int, c float64) {
	if largest.size != 64<<20 {
		return
	}
	for _, op := range ops {
		bw := largest.busbw[op]
		floor, formula, ok := opFloor(op, n, c)
		if !ok || bw <= 0 {
			continue
		}
		fmt.Fprintf(out, "%s 64 MiB: floor %s = %.1f GB/s; busbw %.1f GB/s = %.0f%% of it\n", op, formula, floor/1e9, bw, 100*bw/(floor/1e9))
	}
}
