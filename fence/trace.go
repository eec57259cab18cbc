package fence

import "fmt"

// Side says which side of a fence made a call.
type Side uint8

// The two sides of a fence.
const (
	GPUSide Side = iota + 1
	CPUSide
)

func (s Side) String() string {
	if s == GPUSide {
		return "gpu"
	}
	return "cpu"
}

// Op is a fence call: a wait or an update.
type Op uint8

// The two fence calls.
const (
	OpWait Op = iota + 1
	OpUpdate
)

func (o Op) String() string {
	if o == OpWait {
		return "wait"
	}
	return "update"
}

// Step is one call recorded on a fence: which side, which call, and the
// value it used (the side's count of its calls so far).
type Step struct {
	Side  Side
	Op    Op
	Value uint32
}

func (s Step) String() string { return fmt.Sprintf("%s.%s(%d)", s.Side, s.Op, s.Value) }
