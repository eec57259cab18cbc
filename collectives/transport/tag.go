package transport

import "fmt"

// Tag matches a message: a Recv takes only a message sent with an equal Tag
// from the given source. Group and Seq name one collective (the group id and
// the call-order sequence number that every rank of the group gives it);
// Step tells the messages of one collective apart. Abort acts on
// (Group, Seq) and so on every Step of the collective.
//
// The layout of the three fields is the wire format every transport
// carries, and is defined here only (CollTag, P2PTag, DerivedGroup):
//
//   - Seq: a collective's sequence number, below 1<<63; or, with bit 63
//     set, a point-to-point message: src<<48 | dst<<32 | the pair's
//     count mod 2^32 (ranks below MaxP2PRank).
//   - Step: a part number (a staged pipeline's part, below MaxParts) in
//     the bits from PartShift up, the algorithm's step below it (below
//     MaxStep). A stream of chunks carries the chunk's index modulo the
//     algorithm's depth in its step, so a transport may spread one pair's
//     traffic over several connections without a reorder buffer: messages
//     on one Tag are FIFO, different Tags are independent.
//   - Group: a world's id, or (bit 63 set) a group derived from one by
//     Split, so the two never meet.
type Tag struct {
	Group uint64
	Seq   uint64
	Step  uint32
}

// The tag layout (see Tag): where a part number starts in Step, the
// bounds of an algorithm's steps, of a collective's parts and sequence
// numbers, and of the ranks that send point to point.
const (
	PartShift  = 20
	MaxStep    = 1 << PartShift
	MaxParts   = 1 << (32 - PartShift)
	MaxSeq     = 1 << 63
	MaxP2PRank = 1 << 15

	p2pBit     = 1 << 63 // a point-to-point Seq
	derivedBit = 1 << 63 // a group made by Split
)

// CollTag is the tag of step step of part part of the collective seq of
// group. The caller keeps seq < MaxSeq, part < MaxParts and step < MaxStep;
// CollTag panics otherwise (a broken algorithm, not bad input).
func CollTag(group, seq uint64, part, step uint32) Tag {
	if seq >= MaxSeq || part >= MaxParts || step >= MaxStep {
		panic(fmt.Sprintf("transport: CollTag(seq %d, part %d, step %d) out of the layout", seq, part, step))
	}
	return Tag{Group: group, Seq: seq, Step: part<<PartShift | step}
}

// P2PTag is the tag (Step 0) of the seq-th point-to-point message from src
// to dst in group: it never equals a collective's tag, and Abort of it
// fails that message's Send and Recv only. src and dst must be below
// MaxP2PRank; seq counts modulo 2^32.
func P2PTag(group uint64, src, dst int, seq uint64) Tag {
	if src < 0 || dst < 0 || src >= MaxP2PRank || dst >= MaxP2PRank {
		panic(fmt.Sprintf("transport: P2PTag(src %d, dst %d) out of the layout", src, dst))
	}
	return Tag{Group: group, Seq: p2pBit | uint64(src)<<48 | uint64(dst)<<32 | seq&0xFFFFFFFF}
}

func (t Tag) P2P() bool { return t.Seq&p2pBit != 0 }

// Collective is the tag with its Step cleared: the name of the collective
// (or point-to-point message) t belongs to, which Abort acts on.
func (t Tag) Collective() Tag { return Tag{Group: t.Group, Seq: t.Seq} }

func (t Tag) Part() uint32 { return t.Step >> PartShift }

// WithStep returns t with its algorithm step replaced by step (its part
// kept).
func (t Tag) WithStep(step uint32) Tag {
	if step >= MaxStep {
		panic(fmt.Sprintf("transport: step %d out of the layout", step))
	}
	t.Step = t.Step&^(MaxStep-1) | step
	return t
}

// DerivedGroup turns a hash of a parent group and its members into the id of
// a group made by Split: never equal to a world's id, which is below 1<<63.
func DerivedGroup(hash uint64) uint64 { return hash | derivedBit }

func (t Tag) String() string {
	if t.P2P() {
		return fmt.Sprintf("(group %d p2p %d->%d #%d step %d)", t.Group, t.Seq>>48&0x7FFF, t.Seq>>32&0xFFFF, t.Seq&0xFFFFFFFF, t.Step)
	}
	if t.Part() != 0 {
		return fmt.Sprintf("(group %d seq %d part %d step %d)", t.Group, t.Seq, t.Part(), t.Step&(MaxStep-1))
	}
	return fmt.Sprintf("(group %d seq %d step %d)", t.Group, t.Seq, t.Step)
}
