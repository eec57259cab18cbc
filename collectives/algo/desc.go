package algo

import (
	"fmt"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// Kind is the collective a Desc describes.
type Kind uint8

// The collectives.
const (
	KindAllReduce Kind = iota + 1
	KindAllGather
	KindReduceScatter
	KindBroadcast
	KindSend
	KindRecv
	KindBarrier
	// KindSplit is Group.Split's exchange of (color, key): an all-gather
	// of its own kind, so it never meets another collective's call.
	KindSplit
	KindAllToAll
	KindGather
	KindScatter
	KindReduce
)

var kindNames = [...]string{
	KindAllReduce: "allreduce", KindAllGather: "allgather", KindReduceScatter: "reducescatter",
	KindBroadcast: "broadcast", KindSend: "send", KindRecv: "recv", KindBarrier: "barrier",
	KindSplit: "split", KindAllToAll: "alltoall", KindGather: "gather", KindScatter: "scatter", KindReduce: "reduce",
}

func (k Kind) String() string {
	if k >= KindAllReduce && k <= KindReduce {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Desc describes one collective call on one rank. All ranks of a collective
// pass equal descriptors (Peer aside); the match at the start of every call
// checks it.
//
//   - Group names the group; Seq is the collective's position in the group's
//     call order (the same on every rank; below 1<<63). For Send and Recv,
//     Seq instead counts the calls between the two ranks: the k-th Send from
//     a to b meets the k-th Recv on b from a (each side counts its own calls
//     per peer, in call order).
//   - Count is the number of elements of the input per rank: AllReduce
//     in/out, AllGather in (out is Size*Count), ReduceScatter in (out is this
//     rank's block, see BlockRange), Broadcast buf, Send in / Recv out,
//     Gather in (the root's out is Size*Count), Scatter out (the root's in
//     is Size*Count), Reduce in (and the root's out), AllToAll in (its
//     counts per peer are arguments of their own, which the match checks
//     pairwise).
//   - Op is used by AllReduce, ReduceScatter and Reduce; Root by
//     Broadcast, Gather, Scatter and Reduce; Peer by Send (destination) and
//     Recv (source); other fields are ignored.
//   - Whole, when not 0, says the call is one part of a collective that
//     runs as several calls on consecutive parts of its payload (a staged
//     pipeline): Whole is the element count of the whole payload, which
//     every rank's match checks, and Part numbers the parts from 0, below
//     MaxParts. Part 0 uses the tags of a whole collective, so a rank that
//     splits meets a rank that does not in the first match, which fails
//     with ErrShapeMismatch. Every part's messages are told apart by their
//     tags, and an abort of the collective (Group, Seq) reaches all of
//     them.
type Desc struct {
	Kind  Kind
	Group uint64
	Seq   uint64
	DType gpu.DType
	Count int
	Op    reduce.Op
	Root  int
	Peer  int
	Part  uint32
	Whole int
}

// MaxParts bounds Desc.Part (the tag layout's part bits, see
// transport.Tag).
const MaxParts = transport.MaxParts

func (d Desc) String() string {
	s := fmt.Sprintf("%s %s count=%d", d.Kind, d.DType, d.Count)
	switch d.Kind {
	case KindAllReduce, KindReduceScatter:
		s += " op=" + d.Op.String()
	case KindReduce:
		s += fmt.Sprintf(" op=%s root=%d", d.Op, d.Root)
	case KindBroadcast, KindGather, KindScatter:
		s += fmt.Sprintf(" root=%d", d.Root)
	case KindSend, KindRecv:
		s += fmt.Sprintf(" peer=%d", d.Peer)
	}
	return s
}

// reduces reports whether the kind applies Op.
func (k Kind) reduces() bool { return k == KindAllReduce || k == KindReduceScatter || k == KindReduce }

// rooted reports whether the kind has a root.
func (k Kind) rooted() bool {
	return k == KindBroadcast || k == KindGather || k == KindScatter || k == KindReduce
}

// BlockRange is the element range [lo, hi) of block b when count elements
// are split over n ranks: every block gets count/n elements and the first
// count%n blocks one more, in rank order. So with count < n the last blocks
// are empty. ReduceScatter leaves block r on rank r; the ring and direct
// algorithms use the same split.
func BlockRange(count, n, b int) (lo, hi int) {
	base, extra := count/n, count%n
	lo = b*base + min(b, extra)
	hi = lo + base
	if b < extra {
		hi++
	}
	return lo, hi
}
