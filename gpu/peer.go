package gpu

import "fmt"

// ReduceOp is the reduction a PeerReduce applies. Its codes are those of
// collectives' Op (Sum 1, Prod 2, Min 3, Max 4).
type ReduceOp uint8

// The reductions.
const (
	OpSum ReduceOp = iota + 1
	OpProd
	OpMin
	OpMax
)

func (o ReduceOp) String() string {
	switch o {
	case OpSum:
		return "sum"
	case OpProd:
		return "prod"
	case OpMin:
		return "min"
	case OpMax:
		return "max"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Valid reports whether o is one of the reductions.
func (o ReduceOp) Valid() bool { return o >= OpSum && o <= OpMax }

// PeerTable is a small table of buffers that GPU commands look up when they
// run, not when they are queued: a collective queues its kernels at launch,
// before it knows its peers' buffers, and its communication side fills the
// table and arms it before the fence wait in front of the kernels lets them
// run. A command that finds its table unarmed does nothing (the collective
// failed before its peers were known; its outputs are failed by their
// fence). Entries are set before Arm, from one goroutine; Arm publishes
// them to the device. Err reports, once the commands that read the table
// have run, whether one of them met an entry too short for its range (and
// so wrote nothing). Free is idempotent; the table must outlive the
// commands that read it.
type PeerTable interface {
	Len() int
	Set(i int, b Buffer) error
	Arm()
	Err() error
	Free() error
}

// PeerDevice is implemented by devices whose kernels can read and write any
// of their own buffers named in a PeerTable: the device-resident data path
// of the collectives.
type PeerDevice interface {
	NewPeerTable(n int) (PeerTable, error)
}

// PeerReduce sets, when it runs, for every destination entry d in
// [DstLo, DstHi) of Table and every i < N:
//
//	d[DstOff+i] = s0[SrcOff+i] op s1[SrcOff+i] op ...
//
// over the source entries [SrcLo, SrcHi) in entry order (one source: a
// copy, whatever Op). Offsets and N count elements of DType. float32 and
// float64 compute in their own precision, float16 and bfloat16 in float32
// rounded once per element, integers wrap; Min and Max of a NaN are NaN.
// Destinations must not overlap sources unless they are the same range of
// the same buffer. An unarmed table makes it do nothing.
type PeerReduce struct {
	Table                      PeerTable
	SrcLo, SrcHi, DstLo, DstHi int
	SrcOff, DstOff, N          int
	DType                      DType
	Op                         ReduceOp
}

// Validate implements Command.
func (c PeerReduce) Validate() error {
	if c.Table == nil {
		return badArg("peer reduce", "nil table")
	}
	if !c.DType.Valid() {
		return badArg("peer reduce", "invalid dtype %v", c.DType)
	}
	if c.SrcHi-c.SrcLo > 1 && !c.Op.Valid() {
		return badArg("peer reduce", "invalid op %v", c.Op)
	}
	n := c.Table.Len()
	if c.SrcLo < 0 || c.SrcHi <= c.SrcLo || c.SrcHi > n || c.DstLo < 0 || c.DstHi <= c.DstLo || c.DstHi > n {
		return badArg("peer reduce", "entries [%d,%d) -> [%d,%d) outside a table of %d", c.SrcLo, c.SrcHi, c.DstLo, c.DstHi, n)
	}
	if c.N < 0 || c.SrcOff < 0 || c.DstOff < 0 {
		return badArg("peer reduce", "negative count or offset")
	}
	return nil
}

func (c PeerReduce) String() string {
	return fmt.Sprintf("peer-reduce(%s %s x%d, entries [%d,%d)+%d -> [%d,%d)+%d)",
		c.DType, c.Op, c.N, c.SrcLo, c.SrcHi, c.SrcOff, c.DstLo, c.DstHi, c.DstOff)
}
