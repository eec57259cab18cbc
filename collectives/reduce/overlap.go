package reduce

import "unsafe"

// overlap reports how a and b share memory: none, identical (same start and
// length) or partial (any other sharing of at least one byte).
func overlap(a, b []byte) overlapKind {
	if len(a) == 0 || len(b) == 0 {
		return overlapNone
	}
	pa := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	pb := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if pa+uintptr(len(a)) <= pb || pb+uintptr(len(b)) <= pa {
		return overlapNone
	}
	if pa == pb && len(a) == len(b) {
		return overlapSame
	}
	return overlapPartial
}

// overlapKind is the result of overlap.
type overlapKind uint8

const (
	overlapNone overlapKind = iota
	overlapSame
	overlapPartial
)
