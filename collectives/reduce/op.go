package reduce

import (
	"fmt"
	"strings"
)

// Op is a reduction operator. The zero value is invalid.
type Op uint8

// The reduction operators.
const (
	Sum Op = iota + 1
	Prod
	Min
	Max
)

// Ops lists every valid Op, in declaration order.
var Ops = []Op{Sum, Prod, Min, Max}

var opNames = [...]string{Sum: "sum", Prod: "prod", Min: "min", Max: "max"}

// Valid reports whether o is one of Sum, Prod, Min, Max.
func (o Op) Valid() bool { return o >= Sum && o <= Max }

// String returns "sum", "prod", "min" or "max", and "op(N)" for an invalid Op.
func (o Op) String() string {
	if o.Valid() {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ParseOp turns a name as printed by String (case-insensitive, surrounding
// space ignored; "add", "product", "mul", "minimum", "maximum" are accepted
// too) into an Op. Anything else is an error wrapping ErrBadOp.
func ParseOp(s string) (Op, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "sum", "add":
		return Sum, nil
	case "prod", "product", "mul":
		return Prod, nil
	case "min", "minimum":
		return Min, nil
	case "max", "maximum":
		return Max, nil
	}
	return 0, fmt.Errorf("reduce: unknown op %q: %w", s, ErrBadOp)
}
