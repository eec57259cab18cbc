package main

import (
	"fmt"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
)

// The exchange ops of the sweep: all-to-all (even and uneven), the rooted
// ops and the batched ring. size(B) is what each rank contributes, as for
// the others:
//   - alltoall: the rank's whole input (Size() blocks, one per rank;
//     elements rounded down to a multiple of the ranks);
//   - alltoallv: the rank's whole input, split by unevenSplit (every rank
//     sends and receives size(B));
//   - gather: the rank's block (root 0 gets N x size);
//   - scatter: the block each rank gets (root 0's input is N x size);
//   - reduce: the rank's input (root 0 gets the sum);
//   - sendrecv_batch: what each rank sends its right neighbour (and
//     receives from its left), the send and the receive one Batch.
//
// Bandwidth as nccl-tests computes it (its *_GetBw functions): algbw is
// the bytes of the buffer the op is named for over the time, busbw scales
// it by what the busiest rank must move:
//   - alltoall, alltoallv: algbw = size/time, busbw = algbw x (N-1)/N (a
//     rank keeps 1/N of its input and receives (N-1)/N of its output);
//   - gather, scatter: algbw = N x size/time (the root's whole buffer),
//     busbw = algbw x (N-1)/N (the root receives or sends every block but
//     its own);
//   - reduce: algbw = busbw = size/time (every element of the result passes
//     the root's link once, as for broadcast);
//   - sendrecv_batch: busbw = algbw = size/time, as for sendrecv.
//
// The alltoallv row uses the same split in every peer (bench/peers):
// unevenSplit.

// benchRoot is the root of the rooted ops' rows.
const benchRoot = 0

// exchangeOp reports whether op is one of the exchange ops, whose rank r
// contributes all r+1 (the others' inputs are all r%3), so that every
// block's source is told apart.
func exchangeOp(op string) bool {
	switch op {
	case "alltoall", "alltoallv", "gather", "scatter", "reduce", "sendrecv_batch":
		return true
	}
	return false
}

// unevenSplit is the alltoallv rows' split of count elements, the same on
// every rank and in every peer: rank i sends rank j a share (i+j) mod N of
// N(N-1)/2, so each rank has exactly one peer it sends nothing to (itself
// when i = 0 or 2i = N) and one it receives nothing from; the remainder of
// the division goes to the largest share. Every rank's shares, by row and
// by column, are 0..N-1 in some order, so each rank sends and receives
// count elements. split[i][j] is what i sends j.
func unevenSplit(n, count int) [][]int {
	split := make([][]int, n)
	if n == 1 {
		split[0] = []int{count}
		return split
	}
	shares := n * (n - 1) / 2
	unit := count / shares
	for i := range split {
		split[i] = make([]int, n)
		for j := range split[i] {
			w := (i + j) % n
			split[i][j] = unit * w
			if w == n-1 {
				split[i][j] += count - unit*shares
			}
		}
	}
	return split
}

// unevenLabel is the alltoallv rows' redop column: the split, in one word.
const unevenLabel = "(i+j)%N"

// unevenNote is the line under the table that states the split.
func unevenNote(n int) string {
	return fmt.Sprintf("alltoallv: rank i sends rank j (i+j) mod %d shares of %d of its size(B) (one zero count per rank; the remainder to the largest share); gather, scatter, reduce: root %d",
		n, max(n*(n-1)/2, 1), benchRoot)
}

// startExchange starts an exchange op on held rank i and returns its
// output (nil where the rank gets none: a rooted op's other ranks).
func (o *opRun) startExchange(i int) (*array.Array, error) {
	g, s, x := o.w.groups[i], o.w.s[i], o.inputs[i]
	r, n := g.Rank(), g.Size()
	switch o.op {
	case "alltoall":
		return g.AllToAll(s, x)
	case "alltoallv":
		split := unevenSplit(n, o.count)
		recv := make([]int, n)
		for j := range recv {
			recv[j] = split[j][r]
		}
		return g.AllToAllV(s, x, split[r], recv)
	case "gather":
		return g.Gather(s, x, benchRoot)
	case "scatter":
		return g.Scatter(s, x, benchRoot)
	case "reduce":
		return g.Reduce(s, x, collectives.Sum, benchRoot)
	case "sendrecv_batch": // the ring, both halves at once: no order to choose
		ys, err := g.Batch(s, collectives.SendOp(x, (r+1)%n), collectives.RecvOp([]int{o.count}, o.dt, (r+n-1)%n))
		if err != nil {
			return nil, err
		}
		return ys[1], nil
	}
	return nil, fmt.Errorf("unknown op %q", o.op)
}

// exchangeInputShape is the shape of rank inputs for op at count elements.
func exchangeInputShape(op string, n, count int) []int {
	if op == "scatter" {
		return []int{n, count}
	}
	return []int{count}
}

// exchangeWant is the value element j of rank r's output must hold (rank
// q's input is all q+1); ok is false where the rank has no output.
func (o *opRun) exchangeWant(r, j int) float64 {
	n := o.w.size
	switch o.op {
	case "alltoall":
		return float64(j/(o.count/n) + 1)
	case "alltoallv":
		split := unevenSplit(n, o.count)
		for q := range n {
			if j < split[q][r] {
				return float64(q + 1)
			}
			j -= split[q][r]
		}
		return -1
	case "gather":
		return float64(j/o.count + 1)
	case "scatter":
		return float64(benchRoot + 1)
	case "reduce":
		return float64(n * (n + 1) / 2)
	case "sendrecv_batch":
		return float64((r+n-1)%n + 1)
	}
	return -1
}

// outputs is how many outputs of op a group of n ranks has.
func exchangeOutputs(op string, n int) int {
	if op == "gather" || op == "reduce" {
		return 1
	}
	return n
}
